"""From a config to a judge and a scorer, so the CLI, the evaluators and the trainer score alike."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.core.files import cache_setting_dir
from agemem.core.httpclient import ChatClient
from agemem.rewards.base import Judge
from agemem.rewards.composite import mean_breakdown, score_trajectories
from agemem.rewards.config import JudgeConfig, RewardConfig
from agemem.rewards.judges import LLMJudge, RuleJudge, TransformersJudge
from agemem.rewards.registry import check_term_weights
from agemem.rollouts.config import PolicyConfig

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.rollouts.records import Task, Trajectory


def build_rule_judge(config: JudgeConfig, encoder: Encoder | None = None) -> RuleJudge:
    """The offline judge; also the fallback of the model judges. Gets the encoder only when a rule uses it."""
    needs_encoder = config.use_encoder or config.relevance == "cosine"
    if needs_encoder and encoder is None:
        raise ConfigError(
            "reward.judge.use_encoder=true or reward.judge.relevance=cosine needs the env encoder; "
            "pass it to build_judge (or turn both off)"
        )
    return RuleJudge(
        encoder if needs_encoder else None,
        answer_metric=config.answer_metric,
        embedding_weight=config.embedding_weight if config.use_encoder else 0.0,
        relevance=config.relevance,
        relevance_threshold=config.relevance_threshold,
    )


def judge_cache_dir(config: JudgeConfig) -> Path | None:
    """``reward.judge.cache_dir`` resolved: None when empty (no cache), the user's cache for ``auto``."""
    return cache_setting_dir(config.cache_dir, "judge")


def build_judge(config: JudgeConfig, encoder: Encoder | None = None) -> Judge:
    """The judge named by ``reward.judge.backend``; model judges fall back to the rule judge per item."""
    rule = build_rule_judge(config, encoder)
    if config.backend == "rule":
        return rule
    if config.backend == "openai":
        client = ChatClient.from_settings(config)  # retries with backoff, timeout, API key from api_key_env
        return LLMJudge(client, concurrency=config.concurrency, cache_dir=judge_cache_dir(config), fallback=rule)
    from agemem.rollouts.policy import load_policy

    model, tokenizer = load_policy(PolicyConfig(model=config.model, device=config.device, dtype=config.dtype))
    return TransformersJudge(model, tokenizer, max_new_tokens=config.max_tokens, fallback=rule)


@dataclass
class RewardScorer:
    """Scores finished trajectories against their tasks (a batch per call; see ``score_trajectories``)."""

    judge: Judge
    config: RewardConfig
    token_budget: int
    """T_max of the compression term: the env's context budget."""

    def __call__(self, trajectories: Sequence[Trajectory], tasks: Sequence[Task]) -> list[dict[str, float]]:
        return score_trajectories(trajectories, {t.id: t for t in tasks}, self.judge, self.config, self.token_budget)

    def report(self, breakdowns: Sequence[Mapping[str, float]]) -> dict[str, Any]:
        """The mean of every term and the judge's counters (endpoint requests, cache hits, errors, fallbacks)."""
        counters = dict(getattr(self.judge, "counters", {}))  # only model judges count requests and fallbacks
        return {"rewards": mean_breakdown(breakdowns), "judge": {"name": self.judge.name, **counters}}


def build_scorer(reward: RewardConfig, token_budget: int, encoder: Encoder | None = None) -> RewardScorer:
    """The scorer of ``reward`` (its judge built here); ``token_budget`` is T_max of the compression term, the env's
    ``context.max_context_tokens``. A weight in ``reward.term_weights`` must name a registered term."""
    check_term_weights(reward.term_weights)
    return RewardScorer(build_judge(reward.judge, encoder), reward, token_budget)
