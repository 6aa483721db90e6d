"""`agemem eval NAME` for any text-game suite (ALFWorld, SciWorld, PDDL, BabyAI): games played by a memory agent.

One game is one episode (:class:`agemem.tasks.games.GameEpisode`, which training plays too; this module is the
evaluation harness around it). Long-term memory is one scope for the whole run (the suite's name): what the agent
stores in one game is there in the next. Games are played ``eval.chunk_size`` at a time side by side (one engine
call per tick for every pending reply, :func:`agemem.rollouts.driver.play_together`), sharing the memory as it is
written; after each chunk the memory is saved (``memory/after_N.npz``) and then the chunk's records appended to
``examples.jsonl``, so a re-run resumes after the last finished chunk with the memory exactly as it was. Short-term
memory is the game's own context, which grows with every step: the context tools manage it.

Per game (``examples.jsonl``): ``won``; ``progress`` (the best share of the goal reached, 1 when won); ``score``
(the environment's own, SciWorld); ``steps`` (environment steps: commands, invalid ones and steps without a
command); ``invalid``, ``no_action``; ``replies`` (agent replies, the debrief included) and their
``prompt_tokens``; ``tool_calls`` per tool and in total; memory operations; the transcript.

Per run (``results.json``): SR = 100 · the share of games won, PR = 100 · the mean best progress (AgentBoard's
progress rate), both overall and per task type (``SR_type``, ``PR_type``); ``score`` = the mean final environment
score (suites with ``has_score``); ``steps`` = mean environment steps per game (all games; ``steps_won``: the games
won); ``invalid`` and ``no_action`` per game; TN = Σ prompt tokens / Σ agent replies; TC = mean calls per game of
each tool and in total; ``memory``: long-term memory entries at the end. The suite's ``headline`` (SR, or PR for
PDDL) is the column `agemem compare` shows.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
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
    counted,
    tool_call_values,
    write_json,
)
from agemem.eval.runner import PlayProgress, RunContext, evaluate
from agemem.eval.variants import apply_variant
from agemem.rollouts.build import sampling_params
from agemem.rollouts.driver import play_together
from agemem.rollouts.episode import EpisodeSetup
from agemem.tasks.games import GameEpisode, GameResult, game_settings, get_suite, load_games, with_game_prompt
from agemem.tasks.textgame import GameRef, GameSuite

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.core.ltm import LongTermMemory
    from agemem.eval.models import Backend


# --------------------------------------------------------------------------------------------- batching


def steps_status(steps: Sequence[int], max_steps: int) -> str:
    """The games in play, for the progress bar: ``1 playing, step 12/50`` or ``8 playing, steps 3-12/50``."""
    low, high = min(steps), max(steps)
    at = f"step {low}/{max_steps}" if low == high else f"steps {low}-{high}/{max_steps}"
    return f"{len(steps)} playing, {at}"


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
        "progress": result.progress,
        "score": result.score,
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


def progress_of(example: dict[str, Any]) -> float:
    """A game's progress rate in [0, 1]: its best progress (records written before progress existed: won)."""
    return float(example.get("progress", float(example["won"])))


def aggregate(examples: Sequence[dict[str, Any]], task_types: Sequence[str]) -> dict[str, Any]:
    """The run's metrics from its per-game records (see the module docstring for the formulas)."""
    won = [float(e["won"]) for e in examples]
    scores = [e.get("score") for e in examples]
    return {
        "games": len(examples),
        "SR": metrics.percent(won),
        "PR": metrics.percent(progress_of(e) for e in examples),
        "score": metrics.mean(scores),
        "SR_type": metrics.percent_by(((e["task_type"], float(e["won"])) for e in examples), task_types),
        "PR_type": metrics.percent_by(((e["task_type"], progress_of(e)) for e in examples), task_types),
        "games_type": {t: sum(e["task_type"] == t for e in examples) for t in task_types},
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


def resume_point(out: Path, log: ExampleLog, games: Sequence[GameRef], ltm: LongTermMemory, scope: str) -> int:
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
    ltm.clear(scope=scope)
    if start:
        try:
            ltm.restore(saved[start])
        except SnapshotError as err:
            raise ConfigError(f"{err}; delete {out} to start afresh") from err
    return start


# --------------------------------------------------------------------------------------------- the table


def game_columns(suite: GameSuite) -> tuple[Column, ...]:
    """The table of a suite: SR (and PR where progress moves before a win), the environment's score where it has
    one, the headline per task type, steps, invalid commands, TN, TC and cost."""
    headline = suite.headline
    overall = [Column("SR", "SR")]
    if suite.has_progress or headline == "PR":
        overall = [Column("PR", "PR"), Column("SR", "SR")] if headline == "PR" else [*overall, Column("PR", "PR")]
    if suite.has_score:
        overall.append(Column("score", "score"))
    return (
        *RUN_COLUMNS,
        Column("games", "n", "{:d}"),
        *overall,
        *(Column(f"{headline}_type.{t}", suite.label(t)) for t in suite.task_types),
        Column("steps", "steps"),
        Column("steps_won", "steps won"),
        Column("invalid", "invalid", "{:.2f}"),
        Column("TN", "TN", "{:.0f}"),
        *TOOL_CALL_COLUMNS,
        *COST_COLUMNS,
    )


def game_panels(suite: GameSuite) -> tuple[Panel, ...]:
    rate = "success rate" if suite.headline == "SR" else "progress rate"
    unit = "% of games won" if suite.headline == "SR" else "% of goal conditions met (best point)"
    return (
        Panel(rate, ("all", *(suite.label(t) for t in suite.task_types)), unit, ymax=100.0),
        Panel("environment steps per game", ("all games", "games won"), "steps"),
        Panel("tool calls per game", TOOL_CALL_LABELS, "calls"),
    )


def metrics_note(suite: GameSuite) -> str:
    types = ", ".join(f"{suite.label(t)} = {t}" for t in suite.task_types if suite.label(t) != t)
    per_type = f" ({types})" if types else ""
    score = " score: the environment's own final score, mean over games." if suite.has_score else ""
    return (
        f"\nSR: games won, %. PR: progress rate, the best share of the goal reached in a game (1 when won), mean %. "
        f"Per task type: {suite.headline}{per_type}.{score} steps: environment steps per game (all games; steps won: "
        "the games won). invalid: commands the game did not accept, per game. TN: prompt tokens per agent reply. "
        "TC: tool calls per game. " + COST_NOTE
    )


# --------------------------------------------------------------------------------------------- the benchmark


@dataclass
class Games:
    """The games of one run, in play order."""

    items: list[GameRef]


class GameSession:
    """One model under one variant: the games played side by side in chunks, one long-term memory across them."""

    def __init__(self, suite: GameSuite, run: RunContext, games: Games):
        config, backend = run.config, run.backend
        self.suite = suite
        self.config = config
        self.settings = game_settings(config, suite)
        self.out = run.out
        self.resources = run.env_resources()
        self.start = resume_point(run.out, run.log, games.items, self.resources.ltm, suite.name)
        self.previous = self.start
        stop_ids = end_of_turn_ids(backend.tokenizer)
        self.sampling = sampling_params(config.sampling, stop_ids)
        policy_summaries = config.env.summarizer.backend == "policy"
        self.setup = EpisodeSetup(backend.tokenizer, tuple(stop_ids), config.rollout, policy_summaries)
        self.engine = backend.engine
        self.offered = run.offered
        self.position = {g.id: i for i, g in enumerate(games.items)}

    def play(self, chunk: Sequence[GameRef], seed: int | None, progress: PlayProgress) -> list[dict[str, Any]]:
        """Play ``chunk`` side by side, then save the memory: the commit point (memory first, then the records)."""
        scope = self.suite.name  # one long-term memory across the run's games
        sampling = dataclasses.replace(self.sampling, seed=seed)
        width = self.settings.max_live_games or len(chunk)  # SciWorld: each live game holds a JVM
        results: list[GameResult] = []
        for start in range(0, len(chunk), width):
            episodes = [
                GameEpisode(self.suite, game, MemoryEnv(self.resources, scope=scope), self.setup, self.settings)
                for game in chunk[start : start + width]
            ]

            def tell(live: Sequence[int], episodes: list[GameEpisode] = episodes) -> None:
                progress.status(steps_status([len(episodes[i].transcript) for i in live], self.settings.max_env_steps))

            runs = [episode.play() for episode in episodes]
            results += play_together(runs, self.engine, sampling, on_finish=lambda _: progress.advance(1), on_tick=tell)
        ltm = self.resources.ltm
        ltm.save(snapshot_path(self.out, self.position[chunk[-1].id] + 1))
        write_json(self.out / "memory.json", [e.to_json() for e in ltm.entries(scope=scope)])
        return [example_record(result, self.offered) for result in results]

    def committed(self, done: int) -> None:
        """Keep the snapshots a kill from now on can resume from (the newest two)."""
        for n, path in snapshots(self.out).items():
            if n < self.previous:
                path.unlink()
        self.previous = done

    def summary(self) -> dict[str, Any]:
        return {}


class GameBenchmark:
    """`agemem eval <suite.name>` (:class:`agemem.eval.runner.Benchmark`) for a text-game suite."""

    unit = "game"

    def __init__(self, suite: GameSuite):
        self.suite = suite
        self.name = suite.name
        self.headline = suite.headline
        self.columns = game_columns(suite)
        self.panels = game_panels(suite)
        self.metrics_note = metrics_note(suite)

    def configure(self, config: EvalRunConfig, variant: str) -> EvalRunConfig:
        """``config`` set up for ``variant`` (its tools and retrieval) with the suite's system prompt, unless
        ``env.system_prompt`` names one already."""
        if variant == "full_context":  # a game has no Stage-1 material to keep: it would be no_memory renamed
            raise ConfigError(
                f"variant full_context keeps a task's Stage-1 messages in the context; {self.suite.title} games have "
                "none. Use no_memory for the agent without memory"
            )
        configured = with_game_prompt(apply_variant(config, variant), self.suite)
        assert isinstance(configured, EvalRunConfig)
        return configured

    def load(self, config: EvalRunConfig) -> Games:
        return Games(load_games(config, self.suite))

    def identity(self, config: EvalRunConfig) -> dict[str, Any]:
        settings = game_settings(config, self.suite)
        return {
            **self.suite.describe(settings),
            "task_types": sorted(settings.task_types),  # another selection orders the games (and snapshots) anew
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
        return GameSession(self.suite, run, workload)

    def aggregate(self, examples: Sequence[dict[str, Any]]) -> dict[str, Any]:
        return aggregate(examples, self.suite.task_types)

    def describe(self, config: EvalRunConfig, out: Path) -> dict[str, Any]:
        """The split (the suite's ``describe``), and ``memory``: the long-term memory entries at the end."""
        memory_file = out / "memory.json"
        memory = len(json.loads(memory_file.read_text(encoding="utf-8"))) if memory_file.exists() else 0
        return {**self.suite.describe(game_settings(config, self.suite)), "memory": memory}

    def plot_values(self, results: dict[str, Any]) -> dict[str, float | None]:
        by_type = results[f"{self.headline}_type"]
        return {
            "all": results[self.headline],
            **{self.suite.label(t): by_type[t] for t in self.suite.task_types},
            "all games": results["steps"],
            "games won": results["steps_won"],
            **tool_call_values(results["TC"]),
        }

    def title(self, runs: Sequence[dict[str, Any]]) -> str:
        counts = {(r.get("split"), r["games"]) for r in runs}
        if len(counts) == 1:
            split, games = counts.pop()
            where = f"{self.suite.title} {split}" if split else self.suite.title
            return f"{where} ({counted(games, 'game')})"
        return self.suite.title


def benchmark_for(name: str) -> GameBenchmark:
    """The evaluation of the registered suite ``name`` (``agemem eval <name>``)."""
    import agemem.tasks  # noqa: F401  (importing the package registers the built-in suites)

    return GameBenchmark(get_suite(name))


def evaluate_games(
    name: str,
    config: EvalRunConfig,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every model of ``eval.models`` under every ``eval.variants`` on the games of suite ``name``
    (:func:`agemem.eval.runner.evaluate`)."""
    benchmark = benchmark_for(name)
    load_games(config, benchmark.suite)  # a missing package or data folder fails here, before any model resolves
    return evaluate(benchmark, config, out, backends=backends, encoder=encoder)
