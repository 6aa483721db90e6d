"""`agemem learn`: watch GRPO teach a small model to use its memory, on a laptop CPU.

For each run seed, top to bottom:

1. tokenizer   — a byte-level BPE trained on synthetic-task text and the tool protocol;
2. demonstrate — a scripted, imperfect expert plays the SFT tasks (it stores facts, retrieves and
                 avoids distractors only some of the time); a careful one plays the reading drills
                 (only their final answer, read from retrieved memories, is trained on);
3. warm start  — a small random Qwen2 model learns to copy (random-token copy task), then imitates
                 the demonstrations with copy sequences and answer-copy turns mixed in (TRL SFTTrainer);
4. evaluate    — the warm start plays the held-out tasks;
5. GRPO        — step-wise GRPO from the warm start (this project's trainer, the config's reward);
6. evaluate    — the GRPO policy plays the same held-out tasks with the same sampling seeds;

then the seeds are compared: before/after table with 95% intervals, JSON report, reward-curve PNG.
Every stage writes its output under ``output_dir/seed_N/`` and is skipped when that output
exists, so an interrupted run continues where it stopped (GRPO resumes from its checkpoint).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import to_dict
from agemem.core.files import atomic_open
from agemem.core.hostmem import MemoryReleaser
from agemem.core.tools import PAPER_STAGE_TOOLS
from agemem.recipes.learn.config import LearnConfig, LearnRunConfig
from agemem.recipes.learn.evaluate import (
    USEFUL_USE,
    EpisodeScore,
    ci_dict,
    evaluate_policy,
    mean_scores,
    paired_differences,
    read_scores,
    scores_to_rows,
)
from agemem.train.loop import Timer

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.recipes.learn.expert import ExpertHabits
    from agemem.recipes.learn.sft import SFTSettings
    from agemem.rollouts.records import Task, Trajectory

REPORT_METRICS = (
    ("em", "exact match"),
    ("reward", "reward (composite)"),
    ("stored_fact", "stored the answer's fact"),
    ("storage", "storage quality"),
    ("stored_distractor", "stored a distractor"),
    ("retrieved", "retrieval use"),
    ("context_tokens", "context tokens"),
    ("generated_tokens", "generated tokens"),
    ("violations", "format violations"),
    ("retrieved_before_answer", "retrieved before answering"),
    ("updated_stale", "stale entry updated/deleted"),
    ("stale_kept", "stale entry left in memory"),
    ("managed_context", "summarised/filtered, no overflow"),
    ("overflowed", "ended on the prompt cap"),
)
READING_DRILL_HABITS = (1.0, 0.0, 1.0, 1.0, 0.0)
"""the reading drills' expert stores every fact, no distractor, always retrieves and brings changed facts up to
date: each drill ends with a correct answer read from retrieved memories (only that answer is trained on,
:func:`.sft.reading_drill_dataset`). It does not summarise: a drill's context is the one its answer is read in."""
TOKENIZER_DEMOS = 64
"""tokenizer-corpus tasks also played by the expert, so the tool-call and tool-response text is in the corpus."""


@dataclass(frozen=True)
class TaskSeeds:
    """Generator seeds of a run seed's task sets: disjoint by construction, held-out set shared."""

    sft: int
    grpo: int
    tokenizer: int
    eval: int
    drill: int

    @classmethod
    def derive(cls, config: LearnRunConfig, run_seed: int) -> TaskSeeds:
        base = 1000 * (run_seed + 1)
        return cls(sft=base + 1, grpo=base + 2, tokenizer=base + 3, eval=config.learn.eval_seed, drill=base + 4)


def learn(config: LearnRunConfig, *, progress: bool = True) -> dict[str, Any]:
    """Run every seed of ``config.learn.seeds`` (skipping finished ones) and write the comparison."""
    from agemem.core.encoders import build_encoder

    root = Path(config.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    encoder = build_encoder(config.env.encoder)  # one MiniLM for every stage and seed
    results = [run_seed(config, seed, root / f"seed_{seed}", encoder, progress=progress) for seed in config.learn.seeds]
    report = compare_seeds(config, results)
    with atomic_open(root / "learning.json", "w") as handle:
        json.dump(report, handle, indent=2)
    plot_learning(results, root / "learning.png")
    return report


# ---------------------------------------------------------------- one seed
def run_seed(config: LearnRunConfig, seed: int, out: Path, encoder: Encoder, *, progress: bool) -> dict[str, Any]:
    done = out / "result.json"
    if done.exists():
        return json.loads(done.read_text())
    out.mkdir(parents=True, exist_ok=True)
    with MemoryReleaser(config.train.release_memory_s):
        return _run_seed(config, seed, out, encoder, progress=progress)


def _run_seed(config: LearnRunConfig, seed: int, out: Path, encoder: Encoder, *, progress: bool) -> dict[str, Any]:
    seeds = TaskSeeds.derive(config, seed)
    timer = Timer(memory=True)

    # 1-3. tokenizer, demonstrations, warm start; or the warm start learn.warm_start gives
    if config.learn.warm_start:
        from agemem.core.resources import resolve

        warm = Path(resolve(config.learn.warm_start)).expanduser()
    else:
        warm = train_warm_start(config, seed, out, encoder, timer, progress=progress)
    # 4. evaluate the warm start
    eval_tasks = synthetic_tasks(config, config.learn.eval_tasks, seeds.eval)
    before = _stage_evaluate(config, seed, warm, eval_tasks, out / "eval_warm_start.jsonl", encoder, progress)
    timer.lap("eval_warm_start")
    # 5. GRPO
    final = _stage_grpo(_grpo_config(config, seed, seeds, warm, out / "grpo"))
    timer.lap("grpo")
    # 6. evaluate the GRPO policy
    after = _stage_evaluate(config, seed, final, eval_tasks, out / "eval_grpo.jsonl", encoder, progress)
    timer.lap("eval_grpo")

    em_differences = paired_differences(before, after, "em")
    result = {
        "seed": seed,
        "task_seeds": vars(seeds),
        "before": mean_scores(before),
        "after": mean_scores(after),
        "em_difference": ci_dict(em_differences),
        "em_differences": em_differences,
        "reward_curve": _reward_curve(out / "grpo" / "metrics.jsonl"),
        "timings": {**{f"{k}_s": v for k, v in timer.laps.items()}, "total_s": timer.elapsed()},
        "peak_resident_gib": timer.peak_gib,  # per stage; empty where the peak cannot be reset (not Linux)
        "warm_start_dir": str(warm),
        "grpo_policy_dir": str(final),
    }
    with atomic_open(out / "result.json", "w") as handle:
        json.dump(result, handle, indent=2)
    return result


def train_warm_start(
    config: LearnRunConfig, seed: int, out: Path, encoder: Encoder, timer: Timer, *, progress: bool
) -> Path:
    """Stages 1-3 of run seed ``seed`` under ``out`` (each skipped when its output exists, a lap of ``timer`` each);
    returns the warm start's folder (the policy and its tokenizer)."""
    seeds = TaskSeeds.derive(config, seed)
    # 1. tokenizer
    tokenizer = _stage_tokenizer(config, seeds, out / "tokenizer", encoder)
    timer.lap("tokenizer")
    # 2. demonstrations
    sft_tasks = synthetic_tasks(config, config.learn.sft_tasks, seeds.sft)
    demos = _stage_demonstrations(config, seed, sft_tasks, tokenizer, out / "demonstrations.jsonl", encoder)
    drill_tasks = synthetic_tasks(config, config.learn.sft_drills, seeds.drill) if config.learn.sft_drills else []
    drills = _stage_demonstrations(
        config, seed, drill_tasks, tokenizer, out / "drills.jsonl", encoder, habits=READING_DRILL_HABITS
    )
    timer.lap("demonstrate")
    # 3. warm start
    warm = _stage_warm_start(config, seed, tokenizer, demos, drills, out / "warm_start", progress=progress)
    del demos, drills  # ~0.3 GB of token-id lists nothing after the warm start reads
    timer.lap("warm_start")
    return warm


def synthetic_tasks(config: LearnRunConfig, count: int, generator_seed: int) -> list[Task]:
    """``count`` synthetic tasks of generator seed ``generator_seed``, shaped by ``data.synthetic``."""
    from agemem.tasks import load_tasks

    synthetic = replace(config.data.synthetic, num_tasks=count, seed=generator_seed)
    return load_tasks(replace(config, data=replace(config.data, source="synthetic", limit=0, synthetic=synthetic)))


def _play_expert(
    config: LearnRunConfig,
    seed: int,
    tasks: list[Task],
    tokenizer,
    encoder: Encoder,
    habits: tuple[float, float, float, float, float] | None = None,
) -> list[Trajectory]:
    """The expert plays each task once; its responses are encoded with ``tokenizer``. ``habits``: (store fact,
    store distractor, retrieve, update stale, summarise context) probabilities instead of the config's ones."""
    return play_expert(config, tasks, tokenizer, encoder, expert_habits(config.learn, seed, habits))


def expert_habits(
    learn_cfg: LearnConfig, seed: int, rates: tuple[float, float, float, float, float] | None = None
) -> ExpertHabits:
    """The expert ``learn.expert_*`` describes, flipping its coins with ``seed``; ``rates`` (store fact, store
    distractor, retrieve, update stale, summarise context) replace its five probabilities."""
    from agemem.recipes.learn.expert import ExpertHabits

    store_fact, store_distractor, retrieve, update_stale, summarise_context = rates or (
        learn_cfg.expert_store_fact,
        learn_cfg.expert_store_distractor,
        learn_cfg.expert_retrieve,
        learn_cfg.expert_update_stale,
        learn_cfg.expert_summarise_context,
    )
    return ExpertHabits(
        store_fact,
        store_distractor,
        retrieve,
        update_stale=update_stale,
        summarise_context=summarise_context,
        seed=seed,
        whole_message=learn_cfg.expert_whole_message,
        maintenance=learn_cfg.expert_maintenance,
        lookup_stored_only=learn_cfg.expert_lookup_stored_only,
        quote_evidence=learn_cfg.expert_quote_evidence,
        quote_style=learn_cfg.expert_quote_style,
    )


def play_expert(
    config: LearnRunConfig, tasks: list[Task], tokenizer, encoder: Encoder, habits: ExpertHabits
) -> list[Trajectory]:
    """The scripted expert with ``habits`` plays each task once through the real driver and env of ``config``
    (one rollout a task); its responses are encoded with ``tokenizer``."""
    from agemem.core.chat import end_of_turn_ids
    from agemem.recipes.learn.expert import ExpertEngine, SyntheticExpert
    from agemem.rollouts.build import build_driver, build_resources, distractors_for

    if not tasks:
        return []
    expert = SyntheticExpert(
        tasks, habits, stage_tools=PAPER_STAGE_TOOLS if config.rollout.stage_tools == "paper" else None
    )
    play = replace(config, rollout=replace(config.rollout, rollouts_per_task=1))
    engine = ExpertEngine(tokenizer, expert, end_of_turn_ids(tokenizer)[0])
    driver = build_driver(
        play.rollout,
        play.sampling,
        engine,
        tokenizer,
        build_resources(play.env, tokenizer, encoder=encoder),
        progress=False,
    )
    return driver.run(tasks, distractors_for(play.distractors, tasks, encoder)).trajectories


def _stage_tokenizer(config: LearnRunConfig, seeds: TaskSeeds, directory: Path, encoder: Encoder):
    from agemem.core.chat import load_tokenizer
    from agemem.recipes.learn.expert import parse_chatml
    from agemem.recipes.learn.task_tokenizer import save_task_tokenizer, train_task_tokenizer

    if (directory / "tokenizer_config.json").exists():
        return load_tokenizer(str(directory))
    tasks = synthetic_tasks(config, config.learn.tokenizer_tasks, seeds.tokenizer)
    texts = {text for task in tasks for text in (task.question, *task.distractors, *(p.text for p in task.contexts))}
    # the protocol's text (system prompt, tool calls and responses), rendered with Qwen's identical ChatML
    for trajectory in _play_expert(config, seeds.tokenizer, tasks[:TOKENIZER_DEMOS], load_tokenizer(), encoder):
        for step in trajectory.steps:
            texts.update(message["content"] for message in parse_chatml(step.prompt_text))
            texts.add(step.completion_text)
    tokenizer = train_task_tokenizer(sorted(texts), config.learn.vocab_size)
    save_task_tokenizer(tokenizer, directory)
    return load_tokenizer(str(directory))


def _stage_demonstrations(
    config: LearnRunConfig,
    seed: int,
    tasks: list[Task],
    tokenizer,
    path: Path,
    encoder: Encoder,
    habits: tuple[float, float, float, float, float] | None = None,
) -> list[Trajectory]:
    from agemem.rollouts.records import TrajectoryWriter, read_trajectories

    if path.exists():
        return list(read_trajectories(path))
    trajectories = _play_expert(config, seed, tasks, tokenizer, encoder, habits)
    tmp = path.with_suffix(".tmp")
    with TrajectoryWriter(tmp) as writer:
        for trajectory in trajectories:
            writer.write(trajectory)
    tmp.replace(path)
    return trajectories


def _stage_warm_start(
    config: LearnRunConfig,
    seed: int,
    tokenizer,
    demos: list[Trajectory],
    drills: list[Trajectory],
    directory: Path,
    *,
    progress: bool,
) -> Path:
    import torch
    from transformers import Qwen2ForCausalLM

    from agemem.recipes.learn.copy_task import CopySettings, induction_warmup
    from agemem.recipes.learn.sft import supervised_warm_start
    from agemem.rollouts.policy import tiny_qwen2_config

    if (directory / "config.json").exists():
        return directory
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = Qwen2ForCausalLM(tiny_qwen2_config(config.policy, len(tokenizer)))
    model.config.eos_token_id = model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.config.pad_token_id = model.generation_config.pad_token_id = tokenizer.pad_token_id
    learn_cfg = config.learn
    metrics: dict[str, Any] = {}
    if learn_cfg.copy_steps:  # a random model first learns to copy; imitation alone never got there on a CPU
        model.set_attn_implementation(learn_cfg.copy_attention)  # training only: config.json does not keep it
        copying = CopySettings(
            learn_cfg.copy_steps,
            learn_cfg.copy_learning_rate,
            word_share=learn_cfg.copy_word_share,
            seed=seed,
            progress=progress,
        )
        metrics.update(induction_warmup(model, tokenizer, copying))
    model.set_attn_implementation(learn_cfg.warm_start_attention)
    settings = sft_settings(learn_cfg, seed, progress=progress)
    statements = answer_statements(learn_cfg, seed)
    staging = directory.with_name(directory.name + ".tmp")
    metrics.update(
        supervised_warm_start(model, tokenizer, demos, settings, staging, drills=drills, answer_statements=statements)
    )
    (staging / "sft_metrics.json").write_text(json.dumps(metrics, indent=2))
    staging.replace(directory)
    return directory


def sft_settings(learn_cfg: LearnConfig, seed: int, *, progress: bool) -> SFTSettings:
    """The warm start's SFT settings from ``learn.sft_*``."""
    from agemem.recipes.learn.sft import SFTSettings

    return SFTSettings(
        epochs=learn_cfg.sft_epochs,
        learning_rate=learn_cfg.sft_learning_rate,
        batch_size=learn_cfg.sft_batch_size,
        micro_batches=learn_cfg.sft_micro_batches,
        seed=seed,
        copy_share=learn_cfg.sft_copy_share,
        copy_word_share=learn_cfg.copy_word_share,
        maintenance_drills=learn_cfg.sft_maintenance_drills,
        progress=progress,
    )


def answer_statements(learn_cfg: LearnConfig, seed: int) -> list[tuple[str, str]]:
    """The warm start's answer-copy turns (thought quoting a fact, value to answer) on invented statements:
    their own stream, not a task set's."""
    from agemem.recipes.learn.expert import evidence_thought
    from agemem.tasks.synthetic import fact_statements

    return [
        (evidence_thought(sentence, learn_cfg.expert_quote_style), value)
        for sentence, value in fact_statements(learn_cfg.sft_answer_copies, seed=seed)
    ]


def _stage_evaluate(
    config: LearnRunConfig,
    seed: int,
    model_dir: Path,
    tasks: list[Task],
    path: Path,
    encoder: Encoder,
    progress: bool,
) -> list[EpisodeScore]:
    if path.exists():
        return read_scores(path)
    # always the shipped reward (composite, terms read by their effects), so runs trained on answer_only or the
    # paper's literal terms are scored on the same scale
    scoring = replace(config, reward=replace(config.reward, mode="composite", terms="effects"))
    scores, _ = evaluate_policy(scoring, model_dir, tasks, seed=seed, encoder=encoder, progress=progress)
    with atomic_open(path, "w") as handle:
        handle.writelines(json.dumps(row) + "\n" for row in scores_to_rows(scores))
    return scores


def _grpo_config(config: LearnRunConfig, seed: int, seeds: TaskSeeds, warm: Path, out: Path) -> LearnRunConfig:
    data = config.data
    synthetic = replace(data.synthetic, seed=seeds.grpo)
    return replace(
        config,
        output_dir=str(out),
        seed=seed,
        policy=replace(config.policy, model=str(warm), tokenizer=str(warm)),
        data=replace(data, source="synthetic", limit=0, synthetic=synthetic),
        distractors=replace(config.distractors, generator="task", cache_dir=""),
    )


def _stage_grpo(config: LearnRunConfig) -> Path:
    from agemem.core.runs import latest_checkpoint, read_trainer_state
    from agemem.train.loop import train

    output_dir = Path(config.output_dir)
    checkpoint = latest_checkpoint(output_dir)
    if checkpoint is None or read_trainer_state(checkpoint).step < config.max_steps:
        train(config, resume=checkpoint is not None)
        checkpoint = latest_checkpoint(output_dir)
    assert checkpoint is not None
    return checkpoint / "policy"


def _reward_curve(metrics_path: Path) -> list[dict[str, float]]:
    rows = [json.loads(line) for line in metrics_path.read_text().splitlines() if line.strip()]
    keys = ("reward/total", "reward/task", "episode/exact_match", "episode/memory_adds", "episode/retrievals")
    return [{"step": row["step"], **{k: row[k] for k in keys if k in row}} for row in rows]


# ---------------------------------------------------------------- across seeds
def compare_seeds(config: LearnRunConfig, results: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds of every metric before and after GRPO, and the EM improvement's intervals:
    across seeds (Student t over the per-seed mean differences) and pooled (paired over all episodes)."""
    metrics = [name for name, _ in REPORT_METRICS]
    before = {m: sum(r["before"].get(m, math.nan) for r in results) / len(results) for m in metrics}
    after = {m: sum(r["after"].get(m, math.nan) for r in results) / len(results) for m in metrics}
    per_seed = [r["em_difference"]["mean"] for r in results]
    across = ci_dict(per_seed)
    pooled = ci_dict([d for r in results for d in r["em_differences"]])
    # each tool's useful use: on how many seeds it rose (a seed whose evaluation predates the metric counts as not)
    rises = {
        tool: sum(r["after"].get(metric, math.nan) > r["before"].get(metric, math.nan) for r in results)
        for tool, metric in USEFUL_USE.items()
    }
    return {
        "seeds": [r["seed"] for r in results],
        "reward_mode": config.reward.mode,
        "before": before,
        "after": after,
        "em_improvement_across_seeds": across,
        "em_improvement_pooled": pooled,
        "improves": bool(across["low"] > 0) if len(results) > 1 else bool(pooled["low"] > 0),
        "useful_use_rises_on_seeds": rises,
        "per_seed": [
            {k: r.get(k, {}) for k in ("seed", "before", "after", "em_difference", "timings", "peak_resident_gib")}
            for r in results
        ],
        "config": to_dict(config),
    }


def report_table(report: dict[str, Any]):
    """A rich table: each metric before and after GRPO (mean over seeds), EM intervals below."""
    from rich.table import Table

    table = Table(title=f"held-out synthetic tasks, seeds {report['seeds']} (reward: {report['reward_mode']})")
    table.add_column("metric")
    table.add_column("warm start", justify="right")
    table.add_column("after GRPO", justify="right")
    table.add_column("change", justify="right")
    for name, label in REPORT_METRICS:
        b, a = report["before"][name], report["after"][name]
        table.add_row(label, f"{b:.3f}", f"{a:.3f}", f"{a - b:+.3f}")
    for tool, rose in report.get("useful_use_rises_on_seeds", {}).items():
        table.add_row(f"useful {tool} rose", "", "", f"on {rose}/{len(report['seeds'])} seeds")
    for key, label in (("em_improvement_across_seeds", "across seeds"), ("em_improvement_pooled", "pooled")):
        ci = report[key]
        interval = "n/a (one seed)" if math.isnan(ci["low"]) else f"[{ci['low']:+.3f}, {ci['high']:+.3f}]"
        table.add_row(f"EM gain, 95% CI ({label})", "", "", f"{ci['mean']:+.3f} {interval}")
    for seed in report["per_seed"]:
        d = seed["em_difference"]
        minutes = seed["timings"]["total_s"] / 60
        peak = max(seed.get("peak_resident_gib", {}).values(), default=math.nan)
        table.add_row(
            f"seed {seed['seed']} EM ({minutes:.1f} min, {peak:.1f} GiB peak)",
            f"{seed['before']['em']:.3f}",
            f"{seed['after']['em']:.3f}",
            f"{d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]",
        )
    return table


def plot_learning(results: list[dict[str, Any]], path: Path) -> None:
    """Left: training reward per GRPO step for each seed (and their mean, bold, when there are several).
    Right: held-out EM before/after per seed, each bar labelled with its value."""
    import matplotlib

    matplotlib.use("Agg")  # files only: no display on a server
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (curve, bars) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [2, 1]})
    several = len(results) > 1
    for result in results:
        rows = result["reward_curve"]
        steps, rewards = [r["step"] for r in rows], [r["reward/total"] for r in rows]
        curve.plot(steps, rewards, label=f"seed {result['seed']}", linewidth=1, alpha=0.55 if several else 1.0)
    if several:  # the seeds' mean over the steps every seed reached: the trend the noisy single seeds hide
        common = sorted(set.intersection(*({r["step"] for r in result["reward_curve"]} for result in results)))
        by_step = [{r["step"]: r["reward/total"] for r in result["reward_curve"]} for result in results]
        mean = [sum(seed[step] for seed in by_step) / len(by_step) for step in common]
        curve.plot(common, mean, color="black", linewidth=2.2, label="mean of seeds")
    curve.set(xlabel="GRPO step", ylabel="mean training reward", title="training reward per step")
    curve.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # steps are whole
    curve.grid(alpha=0.3)
    if several:  # outside the axes: inside, the legend hides the curves it names
        curve.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8, frameon=False)
    else:
        curve.set_title(f"training reward per step (seed {results[0]['seed']})")
    width = 0.38
    xs = list(range(len(results)))
    before = bars.bar([x - width / 2 for x in xs], [r["before"]["em"] for r in results], width, label="warm start")
    after = bars.bar([x + width / 2 for x in xs], [r["after"]["em"] for r in results], width, label="after GRPO")
    for container in (before, after):
        bars.bar_label(container, fmt="%.2f", fontsize=7, padding=1)
    bars.set_xticks(xs, [f"seed {r['seed']}" for r in results])
    bars.set_xlim(-0.75, len(results) - 0.25)  # one seed keeps bars of the width several seeds have
    bars.set(ylabel="held-out exact match", title="held-out EM", ylim=(0, 1.08))
    bars.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
