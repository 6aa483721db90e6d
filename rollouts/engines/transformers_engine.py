"""The default engine: batched, left-padded ``model.generate`` on CPU or GPU.

Log-probs are recorded while sampling, one ``[B, V]`` slice at a time (keeping every step's
logits would cost ``T x B x V`` floats: 20 GB for 2,048 tokens x 16 prompts x Qwen's 151k
vocabulary). The recorded value is the log-prob of the sampled token under the tempered
full-vocabulary distribution, ``log softmax(logits / temperature)`` — the distribution the
trainer recomputes; top-p/top-k truncation is not folded in (with top_p=1 and top_k=0 the
two coincide exactly). Greedy decoding records ``log softmax(logits)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rollouts.engines.base import CallCounter, Completion, SamplingParams, derive_seed

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


class _SampledLogprobRecorder:
    """A logits processor that keeps the log-prob of each sampled token, one step behind.

    At step t it sees the ids sampled so far, so it can read the log-prob of the token chosen
    at step t-1 from the distribution it stored then; :meth:`finish` reads the last one.
    Custom processors run before the temperature/top-p warpers, so ``scores`` are raw logits.
    """

    def __init__(self, temperature: float):
        self.temperature = temperature if temperature > 0 else 1.0
        self.previous_BV: torch.Tensor | None = None
        self.steps: list[torch.Tensor] = []  # T-1 tensors of shape [B]

    def __call__(self, input_ids_BL: torch.Tensor, scores_BV: torch.Tensor) -> torch.Tensor:
        import torch

        if self.previous_BV is not None:
            self.steps.append(self.previous_BV.gather(1, input_ids_BL[:, -1:]).squeeze(1))
        self.previous_BV = torch.log_softmax(scores_BV.float() / self.temperature, dim=-1)
        return scores_BV

    def finish(self, last_tokens_B: torch.Tensor) -> torch.Tensor:
        """``[B, T]`` log-probs of the sampled tokens (rows that stopped early hold junk past their end)."""
        import torch

        if self.previous_BV is not None:
            self.steps.append(self.previous_BV.gather(1, last_tokens_B[:, None]).squeeze(1))
        self.previous_BV = None
        return torch.stack(self.steps, dim=1) if self.steps else torch.zeros(len(last_tokens_B), 0)


class TransformersEngine:
    """Implements :class:`~rollouts.engines.base.Engine` with ``transformers.generate``.

    Prompts are sorted by length and cut into micro-batches of ``batch_size`` (less padding),
    then returned in input order. The n-th call with a given ``sampling.seed`` samples under
    ``derive_seed(sampling.seed, n)``: what a call draws depends on its base seed and its position
    among that seed's calls only, not on calls made under other seeds.
    """

    name = "transformers"

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, batch_size: int = 32):
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.calls = 0
        self._call_counter = CallCounter()

    def generate(
        self,
        prompts: Sequence[Sequence[int]],
        sampling: SamplingParams,
        *,
        messages: Sequence[list[dict[str, Any]]] | None = None,
    ) -> list[Completion]:
        import torch

        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ValueError("every prompt needs at least one token")
        call_index = self._call_counter.next_index(sampling.seed)
        seed = None if sampling.seed is None else derive_seed(sampling.seed, call_index)
        self.calls += 1
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: list[Completion | None] = [None] * len(prompts)
        devices = [self.model.device] if self.model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices, enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                for index, completion in zip(chunk, self._generate_batch([prompts[i] for i in chunk], sampling)):
                    results[index] = completion
        return [r for r in results if r is not None]

    def _generate_batch(self, prompts: list[Sequence[int]], sampling: SamplingParams) -> list[Completion]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList

        device = self.model.device
        width = max(len(p) for p in prompts)
        input_ids_BP = torch.full((len(prompts), width), self.pad_token_id, dtype=torch.long)
        attention_mask_BP = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, prompt in enumerate(prompts):  # left padding: every prompt ends at column width-1
            input_ids_BP[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
            attention_mask_BP[row, width - len(prompt) :] = 1
        stop_ids = list(sampling.stop_token_ids)
        # Built from scratch so a checkpoint's generation_config.json (Qwen ships top_k=20,
        # repetition_penalty=1.05) cannot silently change what the run configured (defect 1).
        generation_config = GenerationConfig(
            max_new_tokens=sampling.max_tokens,
            do_sample=not sampling.greedy,
            temperature=sampling.temperature if not sampling.greedy else None,
            top_p=sampling.top_p if not sampling.greedy else None,
            top_k=sampling.top_k if not sampling.greedy else None,
            repetition_penalty=1.0,
            eos_token_id=stop_ids or None,
            pad_token_id=self.pad_token_id,
            return_dict_in_generate=True,
        )
        recorder = _SampledLogprobRecorder(sampling.temperature)
        # generate() fills every field left unset above from model.generation_config (eos ids,
        # min_p, no_repeat_ngram_size, suppress_tokens, ...); a neutral one for the call keeps
        # the checkpoint's defaults out entirely.
        checkpoint_defaults = self.model.generation_config
        self.model.generation_config = GenerationConfig()
        try:
            with torch.no_grad():
                output = self.model.generate(
                    input_ids=input_ids_BP.to(device),
                    attention_mask=attention_mask_BP.to(device),
                    generation_config=generation_config,
                    logits_processor=LogitsProcessorList([recorder]),
                )
        finally:
            self.model.generation_config = checkpoint_defaults
        generated_BT = output.sequences[:, width:].cpu()
        logprobs_BT = recorder.finish(output.sequences[:, -1]).cpu()
        completions = []
        stops = set(stop_ids)
        for row in range(len(prompts)):
            ids = generated_BT[row].tolist()
            end = next((i + 1 for i, t in enumerate(ids) if t in stops), None)
            finish = "stop" if end is not None else "length"
            ids = ids[:end] if end is not None else ids[: sampling.max_tokens]
            completions.append(Completion(ids, logprobs_BT[row, : len(ids)].tolist(), finish))
        return completions
