"""Scenario process: `agemem train` with colocated vLLM, checking every weight sync against the trainer.

    python tests/vllm/train_sync_check.py OUT.json [config overrides...]

Runs :func:`agemem.train.loop.train` (the real loop: its step 6 calls ``engine.sync_weights()``) with
``VLLMEngine.sync_weights`` wrapped so that right after every sync (and once after the engine starts, before
any update) the engine's log-probs are compared with the trainer's on

* a fixed token sequence: vLLM's prompt log-probs (temperature 1, the raw distribution) against
  ``log_softmax`` of the trainer's model, position by position;
* a completion the engine samples through :meth:`VLLMEngine.generate` with the run's sampling settings: the
  log-probs the engine reports (what GRPO stores as the sampler's) against the trainer's ``TokenLogprobs``.

Writes one record per check to OUT.json; the test asserts on it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

FIXED_PROMPT = "The capital of France is Paris. The capital of Italy is"
FIXED_COMPLETION = " Rome, and the capital of Spain is Madrid."


def trainer_logprobs(lm: Any, ids: list[int], start: int, temperature: float) -> list[float]:
    """The trainer's log-probs of ``ids[start:]`` given the tokens before each (agemem.train.policy.TokenLogprobs)."""
    import torch

    from agemem.train.policy import TokenLogprobs

    was_training = lm.training
    lm.eval()  # no dropout: the sampler's distribution
    try:
        with torch.no_grad():
            module = TokenLogprobs(lm, temperature=temperature)
            input_ids = torch.tensor([ids])
            cols = torch.arange(start, len(ids))
            values = module(input_ids, torch.ones_like(input_ids), torch.zeros_like(cols), cols)
    finally:
        lm.train(was_training)
    return [float(v) for v in values]


def check(engine: Any, label: str, sampling: Any, records: list[dict[str, Any]]) -> None:
    from vllm import SamplingParams as VLLMSampling

    tokenizer = engine.tokenizer
    lm = engine.generation.model
    prompt = tokenizer(FIXED_PROMPT)["input_ids"]
    fixed = prompt + tokenizer(FIXED_COMPLETION)["input_ids"]
    # prompt_logprobs=0: the log-prob of each given token (raw logits, i.e. temperature 1)
    output = engine.generation.llm.generate(
        [{"prompt_token_ids": fixed}],
        VLLMSampling(max_tokens=1, temperature=1.0, prompt_logprobs=0),
        use_tqdm=False,
    )[0]
    engine_fixed = [output.prompt_logprobs[t][token].logprob for t, token in enumerate(fixed) if t >= len(prompt)]
    trainer_fixed = trainer_logprobs(lm, fixed, len(prompt), 1.0)
    completion = engine.generate([prompt], sampling)[0]
    trainer_sampled = trainer_logprobs(lm, prompt + completion.token_ids, len(prompt), sampling.temperature)
    records.append(
        {
            "label": label,
            "engine_fixed": engine_fixed,
            "trainer_fixed": trainer_fixed,
            "sampled_ids": completion.token_ids,
            "engine_sampled": completion.logprobs,
            "trainer_sampled": trainer_sampled,
            "dtype": str(engine.generation.llm.llm_engine.model_config.dtype),
            "on_cpu": engine.on_cpu,
        }
    )
    diff = max(abs(a - b) for a, b in zip(engine_fixed, trainer_fixed))
    print(f"[sync check] {label}: fixed-sequence max |engine - trainer| = {diff:.2e}", flush=True)


def main() -> None:
    out = Path(sys.argv[1])
    overrides = sys.argv[2:]
    from agemem.core.configlib import load_config
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.rollouts.build import sampling_params
    from agemem.rollouts.engines import vllm_engine
    from agemem.train.loop import train

    config = load_config(AgeMemConfig, "configs/tiny_cpu.yaml", ["engine.backend=vllm", *overrides])
    sampling = sampling_params(config.sampling)
    records: list[dict[str, Any]] = []
    syncs = {"count": 0}
    engine_class = vllm_engine.VLLMEngine
    original_init, original_sync = engine_class.__init__, engine_class.sync_weights

    def init_and_check(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        check(self, "start", sampling, records)

    def sync_and_check(self: Any) -> None:
        original_sync(self)
        syncs["count"] += 1
        check(self, f"sync {syncs['count']}", sampling, records)

    engine_class.__init__ = init_and_check
    engine_class.sync_weights = sync_and_check
    history = train(config)
    out.write_text(json.dumps({"records": records, "steps": len(history), "history": history}, default=str))


if __name__ == "__main__":
    main()
