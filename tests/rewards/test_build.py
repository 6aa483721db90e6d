"""`reward.judge` config → judge, and the scorer the CLI and the trainer call."""

from __future__ import annotations

import json
import re

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rewards.base import AnswerItem, MemoryItem, RelevanceItem
from agemem.rewards.build import build_judge, build_rule_judge, build_scorer
from agemem.rewards.config import JudgeConfig
from agemem.rewards.judges import LLMJudge, RuleJudge, TransformersJudge
from tests.fake_endpoint import FakeChatEndpoint

FACT = ("Marie Curie was born in Warsaw in 1867.",)


def judge_config(*overrides: str) -> JudgeConfig:
    return load_config(AgeMemConfig, overrides=[f"reward.judge.{o}" for o in overrides]).reward.judge


def test_default_judge_is_the_offline_rule_judge_with_token_f1():
    judge = build_judge(judge_config())
    assert isinstance(judge, RuleJudge) and judge.name == "rule:f1:recall" and judge.encoder is None
    # F1("the Eiffel Tower in Paris", "Eiffel Tower"): tokens eiffel tower in paris vs eiffel tower,
    # k=2, P=2/4, R=2/2, F1 = 2·0.5·1/1.5 = 2/3
    assert judge.answer_scores([AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower")]) == [pytest.approx(2 / 3)]


def test_rule_settings_reach_the_judge(word_encoder):
    judge = build_judge(judge_config("answer_metric=em", "relevance=cosine", "relevance_threshold=0.5"), word_encoder)
    assert judge.name == f"rule:em:cosine:{word_encoder.name}"
    assert judge.answer_scores([AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower")]) == [0.0]
    # cosine of identical texts is 1 >= 0.5 -> 1; disjoint word sets have cosine 0 -> 0
    items = [RelevanceItem("curie warsaw", ("curie warsaw",)), RelevanceItem("curie warsaw", ("lyon bread",))]
    assert judge.relevance_scores(items) == [1.0, 0.0]
    # use_encoder off: memory is pure token recall even though the judge holds the encoder
    recall_only = build_rule_judge(judge_config("relevance=cosine"), word_encoder)
    assert recall_only.memory_scores([MemoryItem("Curie, Warsaw", FACT)]) == [pytest.approx(2 / 5)]


def test_use_encoder_blends_the_cosine_into_memory_scores(word_encoder):
    judge = build_judge(judge_config("use_encoder=true", "embedding_weight=1.0"), word_encoder)
    fact = "curie born warsaw"
    # weight 1: the score is the encoder cosine alone, 1.0 for the identical text
    assert judge.memory_scores([MemoryItem(fact, (fact,))]) == [pytest.approx(1.0)]


def test_rules_that_need_an_encoder_say_so_without_one():
    with pytest.raises(ConfigError, match="needs the env encoder"):
        build_judge(judge_config("use_encoder=true"))
    with pytest.raises(ConfigError, match="relevance=cosine"):
        build_judge(judge_config("relevance=cosine"))


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["backend=openai"], "reward.judge.backend=openai needs reward.judge.model"),
        (["backend=transformers"], "needs reward.judge.model=<local model directory or hub id>"),
        (["embedding_weight=1.5"], "embedding_weight=1.5 must be in"),
        (["relevance_threshold=2"], "relevance_threshold=2.0 must be in"),
        (["backend=rule", "concurrency=0"], "concurrency must be >= 1"),
    ],
)
def test_bad_judge_config_is_named(overrides, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        judge_config(*overrides)


def test_openai_backend_talks_to_the_endpoint_and_falls_back_to_the_configured_rules(tmp_path, monkeypatch):
    server = FakeChatEndpoint(lambda body, n: (200, "Score: 8/10") if n == 1 else (500, ""))
    monkeypatch.setenv("JUDGE_KEY", "secret")
    try:
        config = judge_config(
            "backend=openai",
            "model=judge-7b",
            f"base_url={server.url}",
            "api_key_env=JUDGE_KEY",
            "retries=1",
            "concurrency=1",
            "answer_metric=em",
            f"cache_dir={tmp_path / 'cache'}",
        )
        judge = build_judge(config)
        assert isinstance(judge, LLMJudge) and judge.name == "llm:judge-7b"
        items = [AnswerItem("q", "Paris", "Paris"), AnswerItem("q", "the Eiffel Tower in Paris", "Eiffel Tower")]
        # first: the endpoint's 8/10; second: a 500, so the EM rule answers (0, F1 would give 2/3)
        assert judge.answer_scores(items) == [0.8, 0.0]
        _, headers, body = server.requests[0]
        assert headers["Authorization"] == "Bearer secret" and body["model"] == "judge-7b"
        assert body["max_tokens"] == 64 and body["temperature"] == 0.0
        assert judge.counters["errors"] == 1 and judge.counters["fallbacks"] == 1
        assert len(list((tmp_path / "cache").glob("*.json"))) == 1  # only the good reply is cached
    finally:
        server.close()


def test_transformers_backend_loads_a_local_model_directory(tmp_path):
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy

    model, tokenizer = load_policy(PolicyConfig(device="cpu"))
    model.save_pretrained(tmp_path / "judge")
    tokenizer.save_pretrained(tmp_path / "judge")
    judge = build_judge(
        judge_config("backend=transformers", f"model={tmp_path / 'judge'}", "device=cpu", "max_tokens=3")
    )
    assert isinstance(judge, TransformersJudge) and judge.max_new_tokens == 3
    assert isinstance(judge.fallback, RuleJudge)
    (score,) = judge.answer_scores([AnswerItem("q", "Paris", "Paris")])
    # a random model rarely writes a score: either it parsed or the rule judge gave EM/F1 = 1
    assert 0.0 <= score <= 1.0 and judge.counters["requests"] == 1


def test_transformers_backend_with_a_missing_directory_names_the_fix(tmp_path):
    with pytest.raises(ConfigError, match=r"no such folder .*nowhere does not exist"):
        build_judge(judge_config("backend=transformers", f"model={tmp_path / 'nowhere'}"))


def test_scorer_report_has_every_term_mean_and_the_judge():
    from tests.rewards.test_terms import TASK, trajectory  # constructed trajectories with hand-computed terms

    config = load_config(AgeMemConfig)
    scorer = build_scorer(config.reward, config.env.context.max_context_tokens)
    assert scorer.token_budget == config.env.context.max_context_tokens and scorer.config is config.reward
    right, wrong = trajectory(), trajectory(answer="Bergen")
    breakdowns = scorer([right, wrong], [TASK])
    assert right.reward is breakdowns[0] and wrong.reward is breakdowns[1]
    report = scorer.report(breakdowns)
    assert report["judge"] == {"name": "rule:f1:recall"}
    rewards = report["rewards"]
    assert set(rewards) == set(breakdowns[0]) | {"total_std"}
    assert rewards["task"] == 0.5  # F1 1 and 0
    # the totals differ by w_task · (1 - 0) = 1/3 and by what the wrong answer's context state is not paid (effects:
    # compression and preservation times S = 0): compression 1 - 2048/8192 = 0.75, preservation 1 (Ada Quill, Oslo
    # kept), each 1/3 of R_context weighted 1/3: d = 1/3 + (0.75 + 1)/9 = 4.75/9; population std of two values d apart
    # = d/2 = 4.75/18
    assert rewards["total"] == pytest.approx((breakdowns[0]["total"] + breakdowns[1]["total"]) / 2)
    assert breakdowns[1]["context/compression"] == 0.0 and breakdowns[1]["context/preservation"] == 0.0
    assert rewards["total_std"] == pytest.approx(4.75 / 18)
    json.dumps(report)  # the summary file takes it as it is
