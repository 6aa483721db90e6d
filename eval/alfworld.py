"""`agemem eval alfworld`: ALFWorld games played by a memory agent, scored by success rate.

One game is one episode (:class:`agemem.tasks.alfworld.GameEpisode`, which training plays too; this module is the
evaluation harness around it). The game's first observation, with the task ("Your task is
to: …"), arrives as the protected task message; the agent acts with ``<answer>COMMAND</answer>``, which is sent
to the game, and may call the memory tools between commands (the game waits). After every command the next
observation arrives with the admissible commands. A command that is not admissible changes nothing and costs
the step (the agent is told so); a step whose ``alfworld.max_replies_per_step`` replies all went to tools or
format errors passes without a command. At most ``alfworld.max_env_steps`` (50) steps per game. When the game
is over the agent is told whether it won and gets ``alfworld.debrief_replies`` replies to store what worked.

Long-term memory is one scope for the whole run: what the agent stores in one game is there in the next.
Games are played ``eval.chunk_size`` at a time side by side (one engine call per tick for every pending
reply, :func:`play_batch`), sharing the memory as it is written; after each chunk the memory is saved
(``memory/after_N.npz``) and then the chunk's records appended to ``examples.jsonl``, so a re-run resumes
after the last finished chunk with the memory exactly as it was (resume). Short-term memory is the game's own
context, which grows with every step: the context tools manage it.

Per game (``examples.jsonl``): ``won``; ``steps`` (environment steps taken: commands, inadmissible ones and
steps without a command); ``invalid``, ``no_action``; ``replies`` (agent replies, the debrief included) and
their ``prompt_tokens``; ``tool_calls`` per tool and in total; memory operations; the transcript.

Per run (``results.json``): SR = 100 · the share of games won, overall and per task type (``SR_type``);
``steps`` = mean environment steps per game (all games; ``steps_won``: the games won); ``invalid`` and
``no_action`` per game; TN = Σ prompt tokens / Σ agent replies; TC = mean calls per game of each tool and in
total; ``memory``: long-term memory entries at the end.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.chat import end_of_turn_ids
from agemem.core.configlib import ConfigError, to_dict
from agemem.core.env import MemoryEnv
from agemem.core.ltm import SnapshotError
from agemem.eval import metrics
from agemem.eval.config import EvalRunConfig
from agemem.eval.report import (
    COST_COLUMNS,
    COST_NOTE,
    RUN_COLUMNS,
    TOOL_CALL_COLUMNS,
    TOOL_CALL_LABELS,
    Column,
    ExampleLog,
    Panel,
    tool_call_values,
    write_json,
)
from agemem.eval.runner import RunContext, evaluate
from agemem.eval.variants import apply_variant
from agemem.rollouts.build import sampling_params
from agemem.rollouts.engines.base import Completion, Engine, SamplingParams
from agemem.rollouts.episode import EpisodeSetup, GenerationRequest
from agemem.tasks.alfworld import (  # noqa: F401  (game_system_prompt, normalize_command: re-exported)
    BENCHMARK,
    GameEpisode,
    GameResult,
    game_system_prompt,
    normalize_command,
)
from agemem.tasks.alfworld import game_config as with_game_prompt
from agemem.tasks.alfworld_games import TASK_LABELS, TASK_TYPES, Game, discover_games

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.core.ltm import LongTermMemory
    from agemem.eval.models import Backend

MEMORY_SCOPE = "alfworld"
"""the one long-term memory scope of a run: every game reads and writes it."""
COLUMNS = (
    *RUN_COLUMNS,
    Column("games", "n", "{:d}"),
    Column("SR", "SR"),
    *(Column(f"SR_type.{task_type}", TASK_LABELS[task_type]) for task_type in TASK_TYPES),
    Column("steps", "steps"),
    Column("steps_won", "steps won"),
    Column("invalid", "invalid", "{:.2f}"),
    Column("TN", "TN", "{:.0f}"),
    *TOOL_CALL_COLUMNS,
    *COST_COLUMNS,
)
PANELS = (
    Panel("success rate", ("all", *(TASK_LABELS[t] for t in TASK_TYPES)), "% of games won", ymax=100.0),
    Panel("environment steps per game", ("all games", "games won"), "steps"),
    Panel("tool calls per game", TOOL_CALL_LABELS, "calls"),
)
METRICS_NOTE = (
    "\nSR: games won, % (overall and per task type: pick = pick_and_place_simple, look = look_at_obj_in_light, "
    "clean / heat / cool = pick_<x>_then_place_in_recep, pick2 = pick_two_obj_and_place). steps: environment steps "
    "per game (all games; steps won: the games won). invalid: inadmissible commands per game. TN: prompt tokens per "
    "agent reply. TC: tool calls per game. " + COST_NOTE
)


def game_config(config: EvalRunConfig, variant: str) -> EvalRunConfig:
    """``config`` set up for ``variant`` (its tools and retrieval, :func:`agemem.eval.variants.apply_variant`) with the
    ALFWorld system prompt, unless ``env.system_prompt`` names one already
    (:func:`agemem.tasks.alfworld.game_config`)."""
    return with_game_prompt(apply_variant(config, variant))


# --------------------------------------------------------------------------------------------- batching


GameRun = Generator[GenerationRequest, Completion, GameResult]


def play_batch(
    runs: Sequence[GameRun],
    engine: Engine,
    sampling: SamplingParams,
    on_finish: Callable[[GameResult], None] | None = None,
) -> list[GameResult]:
    """Play the games side by side: each tick, one engine call for the pending request of every live game (as
    :class:`agemem.rollouts.driver.RolloutDriver` does for three-stage episodes). Results in the order of ``runs``."""
    results: list[GameResult | None] = [None] * len(runs)
    live: list[tuple[int, GameRun, GenerationRequest]] = []

    def finish(index: int, result: GameResult) -> None:
        results[index] = result
        if on_finish is not None:
            on_finish(result)

    try:
        for index, run in enumerate(runs):
            try:
                live.append((index, run, next(run)))
            except StopIteration as done:
                finish(index, done.value)
        while live:
            requests = [request for _, _, request in live]
            completions = engine.generate(
                [r.prompt_ids for r in requests], sampling, messages=[r.messages for r in requests]
            )
            if len(completions) != len(requests):
                raise RuntimeError(
                    f"engine {engine.name!r} returned {len(completions)} completions for {len(requests)} prompts"
                )
            still_live = []
            for (index, run, _), completion in zip(live, completions):
                try:
                    still_live.append((index, run, run.send(completion)))
                except StopIteration as done:
                    finish(index, done.value)
            live = still_live
    finally:
        for _, run, _ in live:  # interrupted: close the games still open
            run.close()
    return [result for result in results if result is not None]


# --------------------------------------------------------------------------------------------- metrics


def example_record(result: GameResult, offered: Sequence[str]) -> dict[str, Any]:
    """What examples.jsonl keeps of one game: outcome, steps, the counts behind TN and TC, memory, transcript."""
    stats = result.stats
    tokens, replies = metrics.prompt_tokens(result.steps)
    return {
        "id": result.game.id,
        "task_type": result.game.task_type,
        "task": result.task,
        "won": result.won,
        "steps": result.env_steps,
        "invalid": result.invalid,
        "no_action": result.no_action,
        "replies": replies,
        "prompt_tokens": tokens,
        "tool_calls": metrics.count_tool_calls(result.steps, offered),
        "ended_by": result.ended_by,
        "error": result.error,
        "violations": len(stats.violations),
        "max_context_tokens": stats.max_context_tokens,
        "overflow": stats.overflow,
        "memory_ops": [
            {"op": op.op, "ok": op.ok, "memory_id": op.memory_id, "content": op.content} for op in stats.memory_ops
        ],
        "retrievals": len(stats.retrievals),
        "summaries": len(stats.summaries),
        "filters": len(stats.filters),
        "cost": metrics.llm_cost(result.steps, stats.memory_system_cost),
        "transcript": result.transcript,
        "completions": [{"turn": s.turn, "kind": s.kind, "completion": s.completion_text} for s in result.steps],
    }


def aggregate(examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The run's metrics from its per-game records (see the module docstring for the formulas)."""
    won = [float(e["won"]) for e in examples]
    return {
        "games": len(examples),
        "SR": metrics.percent(won),
        "SR_type": metrics.percent_by(((e["task_type"], float(e["won"])) for e in examples), TASK_TYPES),
        "games_type": {t: sum(e["task_type"] == t for e in examples) for t in TASK_TYPES},
        "steps": metrics.mean(e["steps"] for e in examples),
        "steps_won": metrics.mean(e["steps"] for e in examples if e["won"]),
        "invalid": metrics.mean(e["invalid"] for e in examples),
        "no_action": metrics.mean(e["no_action"] for e in examples),
        "replies": metrics.mean(e["replies"] for e in examples),
        "TN": metrics.pooled_mean((e["prompt_tokens"] for e in examples), (e["replies"] for e in examples)),
        "TC": metrics.mean_tool_calls([e["tool_calls"] for e in examples]),
        "cost": metrics.mean_cost([e.get("cost") for e in examples]),
        "ended_by": {
            reason: sum(e["ended_by"] == reason for e in examples)
            for reason in sorted({e["ended_by"] for e in examples})
        },
    }


# --------------------------------------------------------------------------------------------- resume


def snapshot_path(out: Path, games_done: int) -> Path:
    """The long-term memory as it was after the first ``games_done`` games of the run."""
    return out / "memory" / f"after_{games_done:06d}.npz"


def snapshots(out: Path) -> dict[int, Path]:
    found = {}
    for path in (out / "memory").glob("after_*.npz"):
        digits = path.stem.removeprefix("after_")
        if digits.isdigit():
            found[int(digits)] = path
    return found


def resume_point(out: Path, log: ExampleLog, games: Sequence[Game], ltm: LongTermMemory) -> int:
    """How many of ``games`` (a prefix) are done, with the long-term memory restored to the state after them.

    The memory is saved after each chunk before the chunk's records are appended: records beyond the newest
    snapshot (a run killed between the two) are dropped and those games replayed; a snapshot beyond the records
    (killed before the append) is removed.
    """
    finished = log.finished()
    order = [g.id for g in games]
    done = 0
    while done < len(order) and order[done] in finished:
        done += 1
    if done == len(order):
        return done
    stray = [key for key in order[done:] if key in finished]
    if stray:
        raise ConfigError(
            f"{log.path} holds game {stray[0]!r} but not every game before it in this split's order (the games on "
            f"disk changed since that run); use another --out, or delete {out} to start afresh"
        )
    saved = snapshots(out)
    start = max((n for n in saved if n <= done), default=0)
    if start < done:
        log.keep(order[:start])
    for n, path in saved.items():
        if n > start:
            path.unlink()
    ltm.clear(scope=MEMORY_SCOPE)
    if start:
        try:
            ltm.restore(saved[start])
        except SnapshotError as err:
            raise ConfigError(f"{err}; delete {out} to start afresh") from err
    return start


# --------------------------------------------------------------------------------------------- the benchmark


@dataclass
class Games:
    """The games of one run, in play order."""

    items: list[Game]


class GameSession:
    """One model under one variant: the games played side by side in chunks, one long-term memory across them."""

    def __init__(self, run: RunContext, games: Games):
        config, backend = run.config, run.backend
        self.config = config
        self.out = run.out
        self.resources = run.env_resources()
        self.start = resume_point(run.out, run.log, games.items, self.resources.ltm)
        self.previous = self.start
        stop_ids = end_of_turn_ids(backend.tokenizer)
        self.sampling = sampling_params(config.sampling, stop_ids)
        policy_summaries = config.env.summarizer.backend == "policy"
        self.setup = EpisodeSetup(backend.tokenizer, tuple(stop_ids), config.rollout, policy_summaries)
        self.engine = backend.engine
        self.offered = run.offered
        self.position = {g.id: i for i, g in enumerate(games.items)}

    def play(self, chunk: Sequence[Game], seed: int | None, advance: Callable[[int], None]) -> list[dict[str, Any]]:
        """Play ``chunk`` side by side, then save the memory: the commit point (memory first, then the records)."""
        runs = [
            GameEpisode(game, MemoryEnv(self.resources, scope=MEMORY_SCOPE), self.setup, self.config.alfworld).play()
            for game in chunk
        ]
        sampling = dataclasses.replace(self.sampling, seed=seed)
        results = play_batch(runs, self.engine, sampling, on_finish=lambda _: advance(1))
        ltm = self.resources.ltm
        ltm.save(snapshot_path(self.out, self.position[chunk[-1].id] + 1))
        write_json(self.out / "memory.json", [e.to_json() for e in ltm.entries(scope=MEMORY_SCOPE)])
        return [example_record(result, self.offered) for result in results]

    def committed(self, done: int) -> None:
        """Keep the snapshots a kill from now on can resume from (the newest two)."""
        for n, path in snapshots(self.out).items():
            if n < self.previous:
                path.unlink()
        self.previous = done

    def summary(self) -> dict[str, Any]:
        return {}


class ALFWorld:
    """`agemem eval alfworld` (:class:`agemem.eval.runner.Benchmark`)."""

    name = BENCHMARK
    unit = "game"
    columns = COLUMNS
    panels = PANELS
    metrics_note = METRICS_NOTE

    def configure(self, config: EvalRunConfig, variant: str) -> EvalRunConfig:
        return game_config(config, variant)

    def load(self, config: EvalRunConfig) -> Games:
        return Games(load_games(config))

    def identity(self, config: EvalRunConfig) -> dict[str, Any]:
        settings = config.alfworld
        return {
            "split": settings.split,
            "sampling": to_dict(config.sampling),
            "episode": {
                "max_env_steps": settings.max_env_steps,
                "max_replies_per_step": settings.max_replies_per_step,
                "debrief_replies": settings.debrief_replies,
                "show_admissible": settings.show_admissible,
                "tool_format": config.env.tool_format,
                "system_prompt": config.env.system_prompt,
            },
            "encoder": config.env.encoder.model,
        }

    def open(self, run: RunContext, workload: Games) -> GameSession:
        return GameSession(run, workload)

    def aggregate(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return aggregate(examples)

    def describe(self, config: EvalRunConfig, out: Path) -> dict[str, Any]:
        """``split``, and ``memory``: the long-term memory entries at the end of the run."""
        memory_file = out / "memory.json"
        memory = len(json.loads(memory_file.read_text(encoding="utf-8"))) if memory_file.exists() else 0
        return {"split": config.alfworld.split, "memory": memory}

    def plot_values(self, results: dict[str, Any]) -> dict[str, float | None]:
        return {
            "all": results["SR"],
            **{TASK_LABELS[t]: results["SR_type"][t] for t in TASK_TYPES},
            "all games": results["steps"],
            "games won": results["steps_won"],
            **tool_call_values(results["TC"]),
        }

    def title(self, runs: Sequence[dict[str, Any]]) -> str:
        counts = {(r["split"], r["games"]) for r in runs}
        if len(counts) == 1:
            split, games = counts.pop()
            return f"ALFWorld {split} ({games} games)"
        return "ALFWorld"


def load_games(config: EvalRunConfig) -> list[Game]:
    """The games of ``alfworld.split`` (round-robin over task types), the first ``alfworld.limit`` of them."""
    settings = config.alfworld
    games = discover_games(settings.data_dir, settings.split)
    return games[: settings.limit] if settings.limit else games


def evaluate_alfworld(
    config: EvalRunConfig,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every model of ``eval.models`` under every ``eval.variants`` on the games of ``alfworld.split``
    (:func:`agemem.eval.runner.evaluate`)."""
    load_games(config)  # a missing data folder fails here, before any model resolves
    return evaluate(ALFWorld(), config, out, backends=backends, encoder=encoder)
