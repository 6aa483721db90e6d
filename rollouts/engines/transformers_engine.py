"""The default engine: batched, left-padded decoding with a KV cache, on CPU or GPU.

The decoding loop is our own rather than ``model.generate``: a row leaves the batch (and its
KV cache) as soon as it emits a stop token. In a rollout most replies are short and a few run
long (a whole message copied into ``Add_memory``); ``generate`` keeps every finished row in
every forward pass until the longest one ends, and a decode step over 32 rows of 1,100 cached
tokens costs ~7x one over 4 rows (tiny policy, CPU). ``bench/rollout_driver.py`` measures it.

Log-probs are recorded while sampling, one ``[B, V]`` slice at a time (keeping every step's
logits would cost ``T x B x V`` floats: 20 GB for 2,048 tokens x 16 prompts x Qwen's 151k
vocabulary). The recorded value is the log-prob of the sampled token under the distribution it was drawn
from: ``logits / temperature``, top-k / top-p truncated (:func:`truncate_logits`) and renormalised over the
kept tokens, which is what the trainer's loss recomputes (:func:`agemem.train.policy.chosen_token_logprobs`);
with top_p=1 and top_k=0 it is ``log softmax(logits / temperature)``. Greedy decoding records
``log softmax(logits)``.

Prompts that extend an earlier row (the agent's last prompt, its reply, a tool response) reuse that
row's KV instead of recomputing it (:mod:`agemem.rollouts.engines.prefix_cache`): a micro-batch computes only
the columns some row has not cached. Rows are batched by how many tokens they still need to compute.

Nothing is read from the checkpoint's ``generation_config.json`` (Qwen ships top_k=20,
repetition_penalty=1.05): only what the run configured shapes sampling (defect 1).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from agemem.rollouts.config import EngineConfig
from agemem.rollouts.engines.base import CallCounter, Completion, SamplingParams, derive_seed
from agemem.rollouts.engines.grammar import GrammarCompilers, GrammarMasks
from agemem.rollouts.engines.prefix_cache import CachedPrefix, PrefixCache

if TYPE_CHECKING:
    import torch
    from transformers import DynamicCache, PreTrainedModel, PreTrainedTokenizerBase

DEFAULT_PREFIX_CACHE_TOKENS = EngineConfig.prefix_cache_tokens
"""tokens of KV the engine keeps for reuse, as configured by default (``engine.prefix_cache_tokens``)."""


def truncate_logits(logits_BV: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    """Top-k then nucleus truncation of (tempered) logits: dropped tokens get ``-inf``.

    Nucleus keeps the smallest set of most likely tokens whose probability reaches ``top_p``
    (Holtzman et al., 2020): token i survives when the mass of the tokens ranked above it is
    below ``top_p``, so the most likely token always survives. ``top_k <= 0`` and ``top_p >= 1``
    are off.
    """
    if 0 < top_k < logits_BV.shape[-1]:
        kth_B1 = logits_BV.topk(top_k, dim=-1).values[:, -1:]
        logits_BV = logits_BV.masked_fill(logits_BV < kth_B1, float("-inf"))
    if top_p < 1.0:
        sorted_BV, order_BV = logits_BV.sort(dim=-1, descending=True)
        probs_BV = sorted_BV.softmax(dim=-1)
        mass_above_BV = probs_BV.cumsum(dim=-1) - probs_BV
        drop_sorted_BV = mass_above_BV >= top_p
        drop_BV = drop_sorted_BV.scatter(1, order_BV, drop_sorted_BV)
        logits_BV = logits_BV.masked_fill(drop_BV, float("-inf"))
    return logits_BV


def left_pad(prompts: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``[B, P]`` token ids and attention mask, every prompt right-aligned so all end at column ``P - 1``."""
    import torch

    width = max(len(p) for p in prompts)
    input_ids_BP = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention_mask_BP = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids_BP[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        attention_mask_BP[row, width - len(prompt) :] = 1
    return input_ids_BP, attention_mask_BP


class TransformersEngine:
    """Implements :class:`~agemem.rollouts.engines.base.Engine` with ``transformers.generate``.

    Prompts are sorted by length and cut into micro-batches of ``batch_size`` (less padding),
    then returned in input order. The n-th call with a given ``sampling.seed`` samples under
    ``derive_seed(sampling.seed, n)``: what a call draws depends on its base seed and its position
    among that seed's calls only, not on calls made under other seeds.
    """

    name = "transformers"

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        batch_size: int = 32,
        prefix_cache_tokens: int = DEFAULT_PREFIX_CACHE_TOKENS,
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size={batch_size} must be >= 1")
        self.model = model
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.calls = 0
        self._call_counter = CallCounter()
        # a sliding-window layer keeps only its window, so a stored row would not be the prefix it claims
        self.prefix_cache = PrefixCache(prefix_cache_tokens if _full_attention_cache(model) else 0)
        self._cache_keyword = cache_keyword(model)
        self._grammars = GrammarCompilers()

    def sync_weights(self) -> None:
        """The policy module is shared, so the engine already generates with the new weights; the cached
        prefixes were computed with the old ones and are dropped (``generate`` also checks the weights)."""
        self.prefix_cache.clear()

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
        seed = sampling.seed
        if seed is not None and not sampling.exact_seed:
            seed = derive_seed(seed, call_index)
        self.calls += 1
        prefixes = self._cached_prefixes(prompts)
        # rows needing the same number of fresh columns share a micro-batch: one uncached row would make
        # every row of its batch recompute that many columns
        order = sorted(range(len(prompts)), key=lambda i: (len(prompts[i]) - prefixes[i][1], len(prompts[i])))
        results: list[Completion | None] = [None] * len(prompts)
        devices = [self.model.device] if self.model.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices, enabled=seed is not None):
            if seed is not None:
                torch.manual_seed(seed)
            for start in range(0, len(order), self.batch_size):
                chunk = order[start : start + self.batch_size]
                batch = self._generate_batch([prompts[i] for i in chunk], [prefixes[i] for i in chunk], sampling)
                for index, completion in zip(chunk, batch):
                    results[index] = completion
        return [r for r in results if r is not None]

    def _cached_prefixes(self, prompts: Sequence[Sequence[int]]) -> list[tuple[CachedPrefix | None, int]]:
        """Per prompt, its longest cached prefix and how many of its tokens that prefix can serve (at most
        all but the last: the last prompt token is fed to get the first logits)."""
        if not self.prefix_cache.enabled:
            return [(None, 0)] * len(prompts)
        self.prefix_cache.validate(self.model)
        found = []
        for prompt in prompts:
            entry, shared = self.prefix_cache.lookup(prompt)
            found.append((entry, min(shared, len(prompt) - 1)))
        return found

    def _generate_batch(
        self, prompts: list[Sequence[int]], prefixes: list[tuple[CachedPrefix | None, int]], sampling: SamplingParams
    ) -> list[Completion]:
        import torch
        from transformers import DynamicCache

        device = self.model.device
        input_ids_BP, attention_mask_BP = left_pad(prompts, self.pad_token_id)
        # positions count real tokens only, so a padded row sees the positions it would see alone
        position_ids_BP = (attention_mask_BP.cumsum(-1) - 1).clamp(min=0)
        # the last `fresh` columns are computed; the columns before them come from cached prefixes
        fresh = max(len(prompt) - reusable for prompt, (_, reusable) in zip(prompts, prefixes))
        cached = input_ids_BP.shape[1] - fresh
        stops = torch.tensor(sorted(set(sampling.stop_token_ids)), dtype=torch.long)
        scale = sampling.temperature if not sampling.greedy and sampling.temperature > 0 else 1.0
        tokens: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list[float]] = [[] for _ in prompts]
        masks = self._grammar_masks(sampling, len(prompts))
        finish = ["length"] * len(prompts)
        live_B = torch.arange(len(prompts))  # which prompt each remaining row is
        cache = DynamicCache(config=self.model.config)  # the model's layer types (sliding-window layers included)
        if cached:
            self._seed_cache(cache, prompts, prefixes, cached, fresh)
        mask_BL = attention_mask_BP.to(device)
        next_position_B1 = position_ids_BP[:, -1:].to(device) + 1
        step_ids_BS = input_ids_BP[:, cached:].to(device)
        step_positions_BS = position_ids_BP[:, cached:].to(device)
        with torch.no_grad():
            for _ in range(sampling.max_tokens):
                logits_BV = (
                    self.model(
                        input_ids=step_ids_BS,
                        attention_mask=mask_BL,
                        position_ids=step_positions_BS,
                        **{self._cache_keyword: cache},
                        use_cache=True,
                        # the prompt pass needs only its last position: [B, P, V] logits over Qwen's 151k
                        # vocabulary would be 40 GB for 32 prompts x 2,048 tokens
                        logits_to_keep=1,
                    )
                    .logits[:, -1, :]
                    .float()
                )
                if masks is not None:  # tokens the grammar forbids next get -inf before any sampling rule
                    logits_BV = masks.apply(logits_BV, live_B.tolist())
                if sampling.greedy:
                    logprobs_BV = torch.log_softmax(logits_BV / scale, dim=-1)
                    chosen_B = logprobs_BV.argmax(dim=-1)
                else:
                    # the logprob reported is the truncated distribution's, as the trainer's loss computes it
                    truncated_BV = truncate_logits(logits_BV / scale, sampling.top_k or 0, sampling.top_p)
                    logprobs_BV = torch.log_softmax(truncated_BV, dim=-1)
                    chosen_B = torch.multinomial(truncated_BV.softmax(dim=-1), 1).squeeze(1)
                chosen_logprob_B = logprobs_BV.gather(1, chosen_B[:, None]).squeeze(1).cpu()
                chosen_cpu_B = chosen_B.cpu()
                for index, token, logprob in zip(live_B.tolist(), chosen_cpu_B.tolist(), chosen_logprob_B.tolist()):
                    tokens[index].append(token)
                    logprobs[index].append(logprob)
                    if masks is not None:
                        masks.accept(index, token)
                stopped_B = torch.isin(chosen_cpu_B, stops)
                for index in live_B[stopped_B].tolist():
                    finish[index] = "stop"
                self._remember(cache, mask_BL, live_B, stopped_B, prompts, prefixes, tokens)
                keep_B = ~stopped_B
                if not keep_B.any():
                    break
                if not keep_B.all():  # finished rows leave the batch and the cache
                    kept = keep_B.nonzero().squeeze(1)
                    live_B, kept = live_B[kept], kept.to(device)
                    chosen_B, mask_BL, next_position_B1 = chosen_B[kept], mask_BL[kept], next_position_B1[kept]
                    cache.batch_select_indices(kept)
                mask_BL = torch.cat([mask_BL, mask_BL.new_ones(len(live_B), 1)], dim=1)
                step_ids_BS, step_positions_BS = chosen_B[:, None], next_position_B1
                next_position_B1 = next_position_B1 + 1
            else:  # max_tokens reached: the rows still live are remembered too
                if sampling.max_tokens:  # (mask_BL already has a column for the last token, never fed)
                    every_B = torch.ones(len(live_B), dtype=torch.bool)
                    self._remember(cache, mask_BL[:, :-1], live_B, every_B, prompts, prefixes, tokens)
        reused = [max(0, len(p) - fresh) if entry is not None else 0 for p, (entry, _) in zip(prompts, prefixes)]
        return [Completion(t, lp, f, cached_prompt_tokens=r) for t, lp, f, r in zip(tokens, logprobs, finish, reused)]

    def _grammar_masks(self, sampling: SamplingParams, rows: int) -> GrammarMasks | None:
        """One grammar matcher per prompt when ``sampling.grammar`` constrains the completions."""
        if sampling.grammar is None:
            return None
        vocab_size = self.model.get_output_embeddings().weight.shape[0]
        compiled = self._grammars.compiled(sampling.grammar, self.tokenizer, vocab_size, sampling.stop_token_ids)
        return GrammarMasks(compiled, rows, vocab_size)

    def _seed_cache(
        self,
        cache: DynamicCache,
        prompts: list[Sequence[int]],
        prefixes: list[tuple[CachedPrefix | None, int]],
        cached: int,
        fresh: int,
    ) -> None:
        """Fill the first ``cached`` columns of every layer with the rows' cached KV, right-aligned like the
        left-padded prompts (a row uses the ``len(prompt) - fresh`` tokens of its prefix that fall there;
        the rest of its columns are padding, masked out)."""
        template = next(entry for entry, _ in prefixes if entry is not None)
        for layer, (keys_HTD, values_HTD) in enumerate(zip(template.keys_LHTD, template.values_LHTD)):
            heads, _, dim = keys_HTD.shape
            keys_BHLD = keys_HTD.new_zeros(len(prompts), heads, cached, dim)
            values_BHLD = values_HTD.new_zeros(len(prompts), heads, cached, dim)
            for row, (prompt, (entry, _)) in enumerate(zip(prompts, prefixes)):
                used = len(prompt) - fresh
                if entry is not None and used > 0:
                    keys_BHLD[row, :, cached - used :] = entry.keys_LHTD[layer][:, :used]
                    values_BHLD[row, :, cached - used :] = entry.values_LHTD[layer][:, :used]
            cache.update(keys_BHLD, values_BHLD, layer)

    def _remember(
        self,
        cache: DynamicCache,
        mask_BL: torch.Tensor,
        live_B: torch.Tensor,
        rows_B: torch.Tensor,
        prompts: list[Sequence[int]],
        prefixes: list[tuple[CachedPrefix | None, int]],
        tokens: list[list[int]],
    ) -> None:
        """Store the KV of the batch rows flagged in ``rows_B`` (before they leave the cache): it covers the
        prompt and every generated token but the last, which was sampled and never fed. It replaces the
        entry the row started from, which it extends."""
        if not self.prefix_cache.enabled or not rows_B.any():
            return
        for row in rows_B.nonzero().squeeze(1).tolist():
            index = int(live_B[row])
            columns = mask_BL[row].nonzero().squeeze(1)
            self.prefix_cache.insert(
                CachedPrefix(
                    tokens=(*prompts[index], *tokens[index][:-1]),
                    keys_LHTD=tuple(layer.keys[row][:, columns] for layer in cache.layers),
                    values_LHTD=tuple(layer.values[row][:, columns] for layer in cache.layers),
                ),
                replaces=prefixes[index][0],
            )


def cache_keyword(model: PreTrainedModel) -> str:
    """The keyword the model's forward takes its KV cache by: ``cache`` from transformers 5.24 on (where
    ``past_key_values`` still works but warns on every forward pass until its removal in 5.40), else
    ``past_key_values`` (5.17 to 5.23, the floor). A PEFT wrapper's forward is ``(*args, **kwargs)``: the
    wrapped model's is read."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"


def _full_attention_cache(model: PreTrainedModel) -> bool:
    """Whether every layer of the model's KV cache keeps all positions (no sliding window, no recurrent
    state): only then is a stored row's KV the whole prefix it is filed under."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    return all(type(layer) is DynamicLayer for layer in DynamicCache(config=model.config).layers)
