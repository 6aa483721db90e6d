"""The batched episode driver: B tasks x K rollouts advanced together.

Each tick the driver takes the pending :class:`~agemem.rollouts.episode.GenerationRequest` of every
live episode (agent steps, and summaries when the policy writes them) and sends them to the
engine in one ``generate`` call; each completion is sent back into its episode, which runs
on until it needs the policy again or finishes. Episodes stay straight-line code; batching
lives here and only here.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tqdm.auto import tqdm

from agemem.core.chat import end_of_turn_ids
from agemem.core.env import EnvResources, MemoryEnv
from agemem.core.summarizers import LLMSummarizer
from agemem.rollouts.config import RolloutConfig
from agemem.rollouts.engines.base import Completion, Engine, SamplingParams
from agemem.rollouts.episode import Episode, EpisodeRun, EpisodeSetup, GenerationRequest, known_texts
from agemem.rollouts.records import Trajectory, TrajectoryWriter

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

    from agemem.rollouts.records import Task

R = TypeVar("R")


@dataclass
class RolloutStats:
    """Throughput of one :meth:`RolloutDriver.run`."""

    episodes: int = 0
    steps: int = 0
    """LLM calls (agent steps and policy summaries)."""
    ticks: int = 0
    """engine calls."""
    prompt_tokens: int = 0
    cached_prompt_tokens: int = 0
    """prompt tokens the engine served from its prefix cache (not recomputed)."""
    generated_tokens: int = 0
    engine_s: float = 0.0
    """time spent inside engine.generate."""
    wall_s: float = 0.0

    @property
    def episodes_per_s(self) -> float:
        return self.episodes / self.wall_s if self.wall_s else 0.0

    @property
    def generated_tokens_per_s(self) -> float:
        return self.generated_tokens / self.wall_s if self.wall_s else 0.0

    @property
    def mean_batch(self) -> float:
        return self.steps / self.ticks if self.ticks else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "episodes": self.episodes,
            "steps": self.steps,
            "ticks": self.ticks,
            "mean_batch": round(self.mean_batch, 2),
            "prompt_tokens": self.prompt_tokens,
            "cached_prompt_tokens": self.cached_prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "engine_s": round(self.engine_s, 3),
            "wall_s": round(self.wall_s, 3),
            "episodes_per_s": round(self.episodes_per_s, 4),
            "generated_tokens_per_s": round(self.generated_tokens_per_s, 2),
        }


@dataclass
class RolloutResult:
    trajectories: list[Trajectory]
    """ordered by task, then rollout index: the K rollouts of a task are adjacent (a GRPO group)."""
    stats: RolloutStats = field(default_factory=RolloutStats)


EpisodeFactory = Callable[["Task", list[str], MemoryEnv, EpisodeSetup, int], EpisodeRun]
"""``(task, distractors, env, setup, rollout_index) -> episode run``: how a task's episode is played
(a task's registration gives one, ``agemem.tasks.base.TaskSpec.episodes``)."""


def three_stage_episode(
    task: Task, distractors: list[str], env: MemoryEnv, setup: EpisodeSetup, rollout_index: int
) -> EpisodeRun:
    """The three-stage :class:`Episode` (the default)."""
    return Episode(task, distractors, env, setup, rollout_index).play()


@dataclass
class _Live:
    key: tuple[int, int]
    """(task position, rollout index)."""
    run: EpisodeRun
    request: GenerationRequest
    scope: str


class RolloutAbandonedError(Exception):
    """``RolloutDriver.run`` stopped early because ``should_stop()`` said so (the trainer's preemption)."""


class RolloutDriver:
    """Plays tasks x K rollouts on one engine, batching every tick's requests into one call.

    ``resources`` is shared by all episodes; each rollout gets its own LTM scope, cleared
    when the episode ends (its final memory is kept in the trajectory). One driver runs one
    ``run`` at a time.
    """

    def __init__(
        self,
        engine: Engine,
        tokenizer: PreTrainedTokenizerBase,
        resources: EnvResources,
        config: RolloutConfig,
        sampling: SamplingParams,
        *,
        progress: bool = True,
        make_episode: EpisodeFactory | None = None,
    ):
        self.engine = engine
        self.make_episode = make_episode or three_stage_episode
        self.resources = resources
        self.config = config
        stop_ids = sampling.stop_token_ids or end_of_turn_ids(tokenizer)
        self.sampling = dataclasses.replace(sampling, stop_token_ids=tuple(stop_ids))
        policy_summaries = resources.config.summarizer.backend == "policy"
        if policy_summaries and not isinstance(resources.summarizer, LLMSummarizer):
            raise ValueError("summarizer.backend=policy needs an LLMSummarizer in the resources")
        self.setup = EpisodeSetup(tokenizer, tuple(stop_ids), config, policy_summaries)
        self.progress = progress

    def run(
        self,
        tasks: Sequence[Task],
        distractors: Mapping[str, list[str]],
        *,
        rollouts_per_task: int | None = None,
        writer: TrajectoryWriter | None = None,
        on_trajectory: Callable[[Trajectory], None] | None = None,
        seed: int | None = None,
        should_stop: Callable[[], bool] | None = None,
    ) -> RolloutResult:
        """Play every task ``rollouts_per_task`` times (default: config K) and return the trajectories.

        ``distractors[task.id]`` are the task's Stage-2 messages, the same for all K rollouts.
        Finished trajectories go to ``writer`` (and ``on_trajectory``) as soon as they end.
        ``seed`` replaces the base sampling seed for this run (the trainer gives each step its own,
        so a resumed run samples what the uninterrupted one did).
        ``should_stop`` is asked before every engine call; when it says True the run raises
        :class:`RolloutAbandonedError` (unfinished episodes' memory is freed, finished ones were already written).
        """
        k = rollouts_per_task or self.config.rollouts_per_task
        sampling = self.sampling if seed is None else dataclasses.replace(self.sampling, seed=seed)
        missing = [t.id for t in tasks if t.id not in distractors]
        if missing:
            raise KeyError(
                f"no distractors for task(s) {missing[:3]}; build them with agemem.rollouts.distractors.prepare"
            )
        prefetch = getattr(self.resources.encoder, "prefetch", None)
        if prefetch is not None:  # one batched embedding of what the episodes will embed one text at a time
            prefetch(text for task in tasks for text in known_texts(task, distractors[task.id], self.config))
        queue = deque((i, r) for i in range(len(tasks)) for r in range(k))
        limit = self.config.max_live_episodes or len(queue)
        live: list[_Live] = []
        done: dict[tuple[int, int], Trajectory] = {}
        stats = RolloutStats()
        start = time.perf_counter()
        bar = tqdm(total=len(queue), desc="rollouts", unit="ep", disable=not self.progress, dynamic_ncols=True)

        def finish(key: tuple[int, int], scope: str, trajectory: Trajectory) -> None:
            self.resources.ltm.clear(scope=scope)  # the trajectory already holds the final memory
            trajectory.meta["engine"] = self.engine.name
            done[key] = trajectory
            if writer is not None:
                writer.write(trajectory)
            if on_trajectory is not None:
                on_trajectory(trajectory)
            bar.update(1)

        try:
            while queue or live:
                # 1. Admit new episodes up to the live limit and run each to its first request.
                while queue and len(live) < limit:
                    task_index, rollout = queue.popleft()
                    task = tasks[task_index]
                    # by position, not id alone: a task listed twice must not share a memory bank; the
                    # same name in every run keeps memory ids (and so prompts) reproducible
                    scope = f"{task_index}:{task.id}/{rollout}"
                    self.resources.ltm.clear(scope=scope)
                    env = MemoryEnv(self.resources, scope=scope)
                    run = self.make_episode(task, list(distractors[task.id]), env, self.setup, rollout)
                    try:
                        live.append(_Live((task_index, rollout), run, next(run), scope))
                    except StopIteration as finished:
                        finish((task_index, rollout), scope, finished.value)
                if not live:
                    break
                if should_stop is not None and should_stop():
                    total = len(done) + len(live) + len(queue)
                    raise RolloutAbandonedError(f"stopped with {len(done)} of {total} episodes done")
                # 2. One engine call for every pending request.
                requests = [episode.request for episode in live]
                tick_start = time.perf_counter()
                try:
                    completions = self.engine.generate(
                        [r.prompt_ids for r in requests], sampling, messages=[r.messages for r in requests]
                    )
                except Exception as error:
                    # a preempted job's generation server may die first: once a stop is asked for, a failed
                    # call ends the rollout the same way the stop would have
                    if should_stop is not None and should_stop():
                        raise RolloutAbandonedError(f"the engine failed while stopping: {error}") from error
                    raise
                stats.engine_s += time.perf_counter() - tick_start
                if len(completions) != len(requests):
                    name, got = self.engine.name, len(completions)
                    raise RuntimeError(f"engine {name!r} returned {got} completions for {len(requests)} prompts")
                stats.ticks += 1
                stats.steps += len(requests)
                stats.prompt_tokens += sum(len(r.prompt_ids) for r in requests)
                stats.cached_prompt_tokens += sum(c.cached_prompt_tokens for c in completions)
                stats.generated_tokens += sum(len(c.token_ids) for c in completions)
                # 3. Each episode consumes its completion and runs on to its next request.
                still_live = []
                for episode, completion in zip(live, completions):
                    try:
                        episode.request = episode.run.send(completion)
                        still_live.append(episode)
                    except StopIteration as finished:
                        finish(episode.key, episode.scope, finished.value)
                live = still_live
                elapsed = time.perf_counter() - start
                bar.set_postfix(
                    live=len(live), tokens=stats.generated_tokens, tok_s=f"{stats.generated_tokens / elapsed:.0f}"
                )
        finally:
            bar.close()
            for episode in live:  # interrupted: free the scopes of unfinished episodes
                self.resources.ltm.clear(scope=episode.scope)
        stats.episodes = len(done)
        stats.wall_s = time.perf_counter() - start
        return RolloutResult([done[key] for key in sorted(done)], stats)


def play_together(
    runs: Sequence[Generator[GenerationRequest, Completion, R]],
    engine: Engine,
    sampling: SamplingParams,
    on_finish: Callable[[R], None] | None = None,
    on_tick: Callable[[Sequence[int]], None] | None = None,
) -> list[R]:
    """Play generator runs side by side (text games, a long conversation's sessions): each tick, one engine call for
    the pending request of every live run, as :class:`RolloutDriver` does for three-stage episodes. Results in the
    order of ``runs``; ``on_tick`` gets the indices of the runs still live after each tick."""
    results: list[R | None] = [None] * len(runs)
    live: list[tuple[int, Generator[GenerationRequest, Completion, R], GenerationRequest]] = []

    def finish(index: int, result: R) -> None:
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
            if on_tick is not None and live:
                on_tick([index for index, _, _ in live])
    finally:
        for _, run, _ in live:  # interrupted: close the runs still open
            run.close()
    return [result for result in results if result is not None]
