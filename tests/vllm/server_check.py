"""Scenario process: the vLLM engine in server mode against a running ``trl vllm-serve`` server.

    python tests/vllm/server_check.py BASE_URL MODEL_DIR OUT.json

Samples a completion of a fixed prompt through :class:`VLLMEngine` (mode=server), scores it with the
trainer's ``TokenLogprobs`` on the same weights (loaded from MODEL_DIR, the directory the server serves),
then calls ``sync_weights()`` and records what it raised. Writes the results to OUT.json.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.vllm.train_sync_check import FIXED_PROMPT, trainer_logprobs


def main() -> None:
    base_url, model_dir, out = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from agemem.rollouts.engines.base import SamplingParams
    from agemem.rollouts.engines.vllm_engine import VLLMEngine

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    engine = VLLMEngine(model, None, tokenizer, mode="server", server_base_url=base_url, server_timeout=60)
    prompt = tokenizer(FIXED_PROMPT)["input_ids"]
    sampling = SamplingParams(temperature=0.7, top_p=1.0, top_k=0, max_tokens=12, seed=0)
    completions = engine.generate([prompt, prompt], sampling)
    result = {
        "completions": [
            {
                "ids": c.token_ids,
                "engine": c.logprobs,
                "trainer": trainer_logprobs(model, prompt + c.token_ids, len(prompt), sampling.temperature),
                "finish_reason": c.finish_reason,
            }
            for c in completions
        ]
    }
    try:
        engine.sync_weights()
        result["sync"] = "ok"
    except Exception as err:  # recorded, asserted by the test
        result["sync"] = f"{type(err).__name__}: {err}"
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
