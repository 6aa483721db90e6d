"""A question-answering task (HotpotQA, synthetic, any QA set): Stage 1 its paragraphs, Stage 2 distractors, Stage 3
its question, scored by the judge and the composite reward. An environment module registers one with its loader."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from agemem.rewards.build import RewardScorer, build_scorer
from agemem.rollouts.driver import EpisodeFactory
from agemem.rollouts.episode import Episode, EpisodeRun, EpisodeSetup, Stages, qa_stages

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.core.env import MemoryEnv
    from agemem.rollouts.config import RolloutConfig
    from agemem.rollouts.records import Task
    from agemem.tasks.base import Evaluation
    from agemem.tasks.config import TaskRunConfig
    from agemem.tasks.stream import StreamSpec


@dataclass(frozen=True)
class QATask:
    """A question-answering task (HotpotQA, synthetic): Stage 1 its paragraphs, Stage 2 distractors, Stage 3 its
    question; scored by the judge and the composite reward (``agemem.rewards.build.build_scorer``)."""

    name: str
    loader: Callable[[TaskRunConfig], list[Task]]
    """every item of the configured split."""
    claims: Callable[[str], bool] = lambda source: False
    """which ``data.source`` values, besides ``name``, mean this task."""
    uses_distractors: bool = True
    evaluation: Evaluation | None = None
    """how ``agemem eval <name>`` offers the task (:class:`agemem.tasks.base.Evaluation`); None: training only."""
    stream: StreamSpec | None = None
    """how ``agemem eval stream --task <name>`` streams it (:class:`agemem.tasks.stream.StreamSpec`); None: none."""
    settings: type | None = None
    """the dataclass of the task's own config section (``<name>.*``), read by ``loader``; None: ``data.*`` only."""

    def accepts(self, source: str) -> bool:
        return self.claims(source)

    def configure(self, config: TaskRunConfig) -> TaskRunConfig:
        return config

    def load(self, config: TaskRunConfig) -> list[Task]:
        return self.loader(config)

    def stages(self, task: Task, distractors: list[str], rollout: RolloutConfig) -> Stages:
        return qa_stages(task, distractors, rollout)

    def episodes(self, config: TaskRunConfig) -> EpisodeFactory:
        """The three-stage episode showing what :meth:`stages` says (a subclass's own Stage-1 messages: LoCoMo's
        sessions)."""

        def play(task: Task, distractors: list[str], env: MemoryEnv, setup: EpisodeSetup, rollout: int) -> EpisodeRun:
            return Episode(task, distractors, env, setup, rollout, self.stages(task, distractors, setup.config)).play()

        return play

    def scorer(self, config: TaskRunConfig, encoder: Encoder | None) -> RewardScorer:
        return build_scorer(config.reward, config.env.context.max_context_tokens, encoder)
