"""The vLLM engine against the transformers engine: same policy, tasks, prompts and sampling, one process.

For each engine: ``time to first step`` (engine construction — for vLLM its start-up, ~40 s on 2 CPU cores —
plus the first ``generate`` of the first driver tick), then ``--repeats`` timed rollouts of B tasks x K
episodes through :class:`~agemem.rollouts.driver.RolloutDriver` (the median is reported): episodes/s and generated
tokens/s over the rollout's wall time, and the share of it spent inside the engine.

The policy is the embedded tiny random Qwen2 at head size 64 (``policy.tiny_hidden_size=128
policy.tiny_heads=2``: vLLM's CPU attention has no kernel for the default's 16), fp32, with the real Qwen
tokenizer. A random policy practically never emits end-of-turn, so every LLM call generates exactly
``sampling.max_tokens`` tokens and both engines do the same work; the table shows the token counts.
vLLM runs colocated (in this process, through TRL's ``VLLMGeneration``), in the policy's dtype.

    python bench/engines_vllm.py                  # in the vLLM venv (.ci/vllm_tier.sh builds .venv-vllm)
    python bench/engines_vllm.py --repeats 3 --tasks 8

Writes ``bench/results/engines_vllm.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB; vLLM's CPU default claims 90% of the RAM
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

RESULTS = Path(__file__).parent / "results" / "engines_vllm.json"


class FirstCall:
    """Wraps an engine; records the wall time at which its first ``generate`` returned."""

    def __init__(self, engine: Any):
        self.engine = engine
        self.name = engine.name
        self.first_done: float | None = None

    def generate(self, prompts, sampling, **kwargs):
        out = self.engine.generate(prompts, sampling, **kwargs)
        if self.first_done is None:
            self.first_done = time.perf_counter()
        return out

    def __getattr__(self, name: str) -> Any:
        return getattr(self.engine, name)


def measure(backend: str, config: Any, model: Any, tokenizer: Any, tasks, distractors, repeats: int) -> dict[str, Any]:
    from dataclasses import replace

    from agemem.rollouts.build import build_driver, build_engine, build_resources

    config = replace(config, engine=replace(config.engine, backend=backend))
    started = time.perf_counter()
    engine = FirstCall(build_engine(config.engine, model, tokenizer))
    built = time.perf_counter()
    resources = build_resources(config.env, tokenizer)
    driver = build_driver(config.rollout, config.sampling, engine, tokenizer, resources, progress=False)
    driver.run(tasks, distractors, seed=0)  # untimed: its first tick is the first step
    runs = []
    for repeat in range(repeats):
        stats = driver.run(tasks, distractors, seed=1 + repeat).stats
        runs.append(stats.to_json() | {"wall_s": stats.wall_s, "engine_s": stats.engine_s})
    wall = statistics.median(r["wall_s"] for r in runs)
    median = min(runs, key=lambda r: abs(r["wall_s"] - wall))
    return {
        "backend": backend,
        "engine_start_s": built - started,
        "time_to_first_step_s": engine.first_done - started,
        "episodes_per_s": median["episodes"] / median["wall_s"],
        "generated_tokens_per_s": median["generated_tokens"] / median["wall_s"],
        "engine_share": median["engine_s"] / median["wall_s"],
        "median_run": median,
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default="configs/rollout-synthetic-cpu.yaml")
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. sampling.max_tokens=64")
    args = parser.parse_args()

    from rich.console import Console
    from rich.table import Table

    from agemem.core.configlib import load_config, to_dict
    from agemem.entrypoints.roots import AgeMemConfig
    from agemem.rollouts.build import build_resources, distractors_for
    from agemem.rollouts.policy import load_policy
    from agemem.tasks import load_task_pool

    config = load_config(
        AgeMemConfig,
        args.config,
        [
            "policy.tiny_hidden_size=128",
            "policy.tiny_heads=2",
            f"data.synthetic.num_tasks={args.tasks}",
            f"rollout.rollouts_per_task={args.k}",
            "distractors.cache_dir=",  # no on-disk cache: nothing written into the repository
            *args.overrides,
        ],
    )
    tasks, pool = load_task_pool(config)
    model, tokenizer = load_policy(config.policy)
    distractors = distractors_for(config.distractors, tasks, build_resources(config.env, tokenizer).encoder, pool)
    results = [measure(b, config, model, tokenizer, tasks, distractors, args.repeats) for b in ("transformers", "vllm")]

    table = Table(title=f"{len(tasks)} tasks x {args.k} episodes, tiny Qwen2 (head size 64, fp32), 2-core CPU")
    for column in ("engine", "first step s", "start-up s", "episodes/s", "gen tok/s", "engine share", "gen tokens"):
        table.add_column(column, justify="right")
    for r in results:
        table.add_row(
            r["backend"], f"{r['time_to_first_step_s']:.1f}", f"{r['engine_start_s']:.1f}",
            f"{r['episodes_per_s']:.3f}", f"{r['generated_tokens_per_s']:.0f}", f"{r['engine_share']:.0%}",
            str(r["median_run"]["generated_tokens"]),
        )  # fmt: skip
    console = Console(width=120)  # the table's seven columns, unabbreviated, in a narrow CI log
    console.print(table)
    speedup = results[1]["generated_tokens_per_s"] / results[0]["generated_tokens_per_s"]
    console.print(f"vLLM / transformers generated tokens/s: {speedup:.2f}x")

    import torch
    import transformers
    import trl
    import vllm

    record = {
        "results": results,
        "vllm_over_transformers_tokens_per_s": speedup,
        "versions": {
            "vllm": vllm.__version__, "torch": torch.__version__, "transformers": transformers.__version__,
            "trl": trl.__version__,
        },
        "machine": {
            "cpus": os.cpu_count(), "platform": platform.platform(), "torch_threads": torch.get_num_threads(),
            "load_average_1_5_15": os.getloadavg(),  # other jobs on the machine slow both engines alike
        },
        "config": to_dict(config),
    }  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(record, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
