"""`agemem eval hotpotqa` end to end: scripted agents through the real driver, env and judges on the
bundled HotpotQA sample; resume; the four variants; an endpoint with an LLM judge; the tiny random
policy through the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import ConfigError, load_config
from agemem.core.tools import TOOL_NAMES
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.models import Backend
from agemem.eval.qa import evaluate_qa
from agemem.tasks import load_tasks
from tests.conftest import WordSetEncoder
from tests.eval.agents import HotpotAgent, MessagesEngine
from tests.fake_endpoint import FakeChatEndpoint

FAST = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false", "eval.models=[scripted]"]


def _config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*FAST, *overrides])


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def sample():
    return load_tasks(AgeMemConfig())


def _evaluate(config, out, tokenizer, policy):
    engine = MessagesEngine(tokenizer, policy)
    backends = {"scripted": Backend(engine, tokenizer)}
    runs = evaluate_qa(config, out, backends=backends, encoder=WordSetEncoder(dim=65536))
    return runs, engine


def _examples(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_gold_agent_scores_100_on_the_whole_bundled_sample(tmp_path, tokenizer, sample):
    config = _config("rollout.stage1_mode=single", "eval.plot=true")
    (results,), _ = _evaluate(config, tmp_path, tokenizer, HotpotAgent(sample))
    assert results["questions"] == 100 and results["played"] == 100
    assert results["J"] == results["EM"] == results["F1"] == 100.0
    assert results["MQ"] == 1.0  # every supporting sentence stored verbatim
    facts = sum(len([f for f in t.supporting_facts if f.text]) for t in sample)
    tc = results["TC"]
    assert tc["Add_memory"] == pytest.approx(facts / 100)  # one Add per supporting sentence
    assert tc["Retrieve_memory"] == 1.0 and tc["Summary_context"] == tc["Filter_context"] == 0.0
    assert tc["total"] == pytest.approx(facts / 100 + 1)
    examples = _examples(tmp_path / "examples.jsonl")
    assert [e["id"] for e in examples] == [t.id for t in sample]
    assert all(e["stage3_steps"] == 2 and e["ended_by"] == "answer" for e in examples)  # retrieve, answer
    tokens = sum(e["stage3_prompt_tokens"] for e in examples)
    assert results["TN"] == pytest.approx(tokens / 200)
    # the Stage-3 answer step sees the retrieved facts: its prompt is longer than the question step's
    assert all(e["stage3_prompt_tokens"] > 2 * 500 for e in examples)
    saved = json.loads((tmp_path / "results.json").read_text())
    assert {"J", "EM", "F1", "MQ", "TN", "TC", "config"} <= set(saved)
    assert saved["config"]["env"]["tools"] == list(TOOL_NAMES) and saved["judge"]["name"] == "rule:f1:recall"
    assert "| scripted | agemem | 100 | 100.0 | 100.0 | 100.0 | 1.000 |" in (tmp_path / "results.md").read_text()
    assert (tmp_path / "results.png").stat().st_size > 10_000


def test_memory_quality_reflects_what_the_agent_stored(tmp_path, tokenizer, sample):
    # question 0: only its first supporting sentence stored; question 1: nothing stored, and a wrong answer
    agent = HotpotAgent(sample[:1], store="first", answers={sample[0].question: sample[0].answer})
    agent.questions[sample[1].question] = sample[1]
    agent.answers[sample[1].question] = "Pete Doherty"
    (results,), _ = _evaluate(_config("data.limit=2"), tmp_path, tokenizer, agent)
    first, second = _examples(tmp_path / "examples.jsonl")
    assert first["memory"] == [sample[0].supporting_facts[0].text] and second["memory"] == []
    assert first["mq"] == pytest.approx((1 + 2 / 18) / 2)  # see test_metrics: 2 of the 18 content words of fact 2
    assert second["mq"] == 0.0
    assert results["MQ"] == pytest.approx(5 / 18)
    assert (second["em"], second["f1"]) == (0.0, 0.0)  # "Pete Doherty" vs 'Jonny" Craig'
    assert results["EM"] == results["J"] == 50.0


def test_resume_plays_only_unfinished_questions(tmp_path, tokenizer, sample):
    agent = HotpotAgent(sample)
    _, engine = _evaluate(_config("data.limit=2"), tmp_path, tokenizer, agent)
    first_questions = {m[-1]["content"] for m in engine.seen if m[-1]["content"] in agent.questions}
    assert first_questions == {sample[0].question, sample[1].question}
    with (tmp_path / "examples.jsonl").open("a") as handle:
        handle.write('{"id": "' + sample[2].id + '", "question": ')  # a run killed mid-write
    (results,), engine = _evaluate(_config("data.limit=4", "eval.chunk_size=1"), tmp_path, tokenizer, agent)
    asked = [m[-1]["content"] for m in engine.seen if m[-1]["content"] in agent.questions]
    assert set(asked) == {sample[2].question, sample[3].question}  # 0 and 1 were skipped
    assert results["played"] == 2 and results["resumed"] == 2 and results["questions"] == 4
    assert [e["id"] for e in _examples(tmp_path / "examples.jsonl")] == [t.id for t in sample[:4]]
    (results,), engine = _evaluate(_config("data.limit=4"), tmp_path, tokenizer, agent)
    assert engine.seen == [] and results["played"] == 0 and results["EM"] == 100.0
    with pytest.raises(ConfigError, match="variant"):
        _evaluate(_config("data.limit=4", "eval.variants=[rag]"), tmp_path, tokenizer, agent)


def _system(conversation):
    return conversation[0]["content"]


def test_variants_offer_their_tools_and_shape_the_episode(tmp_path, tokenizer, sample):
    agent = HotpotAgent(sample)
    config = _config("data.limit=1", "eval.variants=[agemem,no_memory,rag,ltm_only]")
    runs, engine = _evaluate(config, tmp_path, tokenizer, agent)
    by_variant = {r["variant"]: r for r in runs}
    assert set(by_variant) == {"agemem", "no_memory", "rag", "ltm_only"}
    assert (tmp_path / "comparison.md").exists() and (tmp_path / "comparison.json").exists()
    assert all((tmp_path / f"scripted__{v}" / "results.json").exists() for v in by_variant)
    prompts = {}
    for conversation in engine.seen:
        system = _system(conversation)
        variant = (
            "no_memory"
            if '"name": "Add_memory"' not in system
            else "rag"
            if "retrieved for you" in system
            else "ltm_only"
            if '"name": "Filter_context"' not in system
            else "agemem"
        )
        prompts.setdefault(variant, []).append(conversation)
    # no_memory: the question alone, no tools; the agent's Retrieve_memory is an unknown-tool error
    first = prompts["no_memory"][0]
    assert [m["role"] for m in first] == ["system", "user"] and first[1]["content"] == sample[0].question
    assert "Retrieve_memory" not in _system(first)
    assert "no tools are available" in prompts["no_memory"][1][-1]["content"]
    assert by_variant["no_memory"]["MQ"] is None and by_variant["no_memory"]["TC"]["total"] == 0.0
    assert by_variant["no_memory"]["EM"] == 100.0  # it still answers (the scripted agent knows the gold)
    # rag: Add/Update/Delete offered; before the Stage-3 question step the stored facts are shown
    assert '"name": "Retrieve_memory"' not in _system(prompts["rag"][0])
    question_step = next(c for c in prompts["rag"] if c[-2]["content"] == sample[0].question)
    shown = json.loads(question_step[-1]["content"])
    assert shown["source"] == "rag" and question_step[-1]["role"] == "tool"
    assert {m["content"] for m in shown["memories"]} == {f.text for f in sample[0].supporting_facts}
    assert by_variant["rag"]["TC"]["Retrieve_memory"] == 0.0 and by_variant["rag"]["TC"]["Add_memory"] == 2.0
    assert by_variant["rag"]["MQ"] == 1.0
    # ltm_only: the four memory-store tools, no context tools
    system = _system(prompts["ltm_only"][0])
    assert '"name": "Retrieve_memory"' in system and '"name": "Summary_context"' not in system
    assert by_variant["ltm_only"]["TC"]["Retrieve_memory"] == 1.0
    assert by_variant["agemem"]["TC"]["total"] == 3.0


def test_full_context_keeps_the_paragraphs_before_the_question_and_offers_no_tool(tmp_path, tokenizer, sample):
    static = ["distractors.generator=static", "distractors.texts=[Some unrelated chat.]", "distractors.count=2"]
    config = _config("data.limit=2", "eval.variants=[full_context]", "eval.distractors=true", *static)
    (results,), engine = _evaluate(config, tmp_path, tokenizer, HotpotAgent(sample))
    first = engine.seen[0]  # the agent's first step is the question's: Stage 1 arrives unanswered
    users = [m["content"] for m in first if m["role"] == "user"]
    assert users[-1] == sample[0].question and len(users) > 1
    assert all(f.text in "\n".join(users[:-1]) for f in sample[0].supporting_facts)
    assert "Some unrelated chat." not in users  # no Stage 2 in the full-context baseline
    assert '"name":' not in _system(first)  # no tool schema in the prompt
    assert results["TC"]["total"] == 0.0 and results["EM"] == 100.0 and results["MQ"] is None  # no memory
    # per question: the agent's Retrieve_memory (refused: no tools), then its answer; nothing in Stage 1
    assert len(engine.seen) == 4 and sum("no tools are available" in c[-1]["content"] for c in engine.seen) == 2


def test_stage2_distractors_are_off_unless_asked_for(tmp_path, tokenizer, sample):
    static = ["distractors.generator=static", "distractors.texts=[Some unrelated chat.]", "distractors.count=2"]
    static.append("distractors.cache_dir=")
    _, engine = _evaluate(_config("data.limit=1", *static), tmp_path / "off", tokenizer, HotpotAgent(sample))
    assert not any(m[-1]["content"] == "Some unrelated chat." for m in engine.seen)
    on = _config("data.limit=1", "eval.distractors=true", *static)
    (results,), engine = _evaluate(on, tmp_path / "on", tokenizer, HotpotAgent(sample))
    assert sum(m[-1]["content"] == "Some unrelated chat." for m in engine.seen) == 2
    assert results["EM"] == 100.0


def test_endpoint_model_with_an_llm_judge(tmp_path, sample):
    agent = HotpotAgent(sample)

    def reply(body, number):
        messages = body["messages"]
        if messages[0]["content"].startswith("You grade"):
            return 200, "Score: 0.5"  # the judge
        return 200, agent(messages)

    endpoint = FakeChatEndpoint(reply)
    try:
        config = load_config(
            AgeMemConfig,
            overrides=[
                *FAST,
                f"eval.models=[openai:gold-agent@{endpoint.url}]",
                "engine.openai.api=chat",
                "data.limit=2",
                "reward.judge.backend=openai",
                "reward.judge.model=judge",
                f"reward.judge.base_url={endpoint.url}",
            ],
        )
        (results,) = evaluate_qa(config, tmp_path, encoder=WordSetEncoder(dim=65536))
    finally:
        endpoint.close()
    assert results["resolved"]["kind"] == "openai" and results["model"] == "gold-agent"
    assert results["EM"] == results["F1"] == 100.0
    assert results["J"] == 50.0 and results["MQ"] == 0.5  # both from the judge's replies
    judged = [body for _, _, body in endpoint.requests if body["model"] == "judge"]
    facts = sum(len(t.supporting_facts) for t in sample[:2])
    assert len(judged) == 2 + facts  # one answer each, one memory item per supporting fact
    assert results["judge"]["requests"] == 2 + facts and results["judge"]["fallbacks"] == 0


TINY = [
    "sampling.max_tokens=4",
    "rollout.stage1_mode=single",
    "rollout.stage1_max_steps=1",
    "rollout.stage3_max_steps=1",
    "env.summarizer.backend=extractive",
    "logging.progress=false",
]


def test_tiny_random_policy_end_to_end_through_the_cli(tmp_path, capsys):
    from agemem.entrypoints.cli import main
    from agemem.rollouts.policy import load_policy

    # a second model in the layout agemem train writes: run/checkpoints/step_000001/policy
    model, tokenizer = load_policy(AgeMemConfig().policy)
    policy_dir = tmp_path / "run" / "checkpoints" / "step_000001" / "policy"
    model.save_pretrained(policy_dir)
    tokenizer.save_pretrained(policy_dir)
    (policy_dir.parent / "trainer_state.json").write_text('{"step": 1, "tasks_seen": 8, "world_size": 1}')
    out = tmp_path / "eval"
    argv = ["eval", "hotpotqa", "--limit", "1", "--out", str(out), "--model", "tiny-random-qwen2"]
    assert main([*argv, "--model", str(tmp_path / "run"), *TINY]) == 0
    comparison = json.loads((out / "comparison.json").read_text())
    assert [r["model"] for r in comparison] == ["tiny-random-qwen2", "run/step_000001"]
    assert comparison[1]["resolved"]["checkpoint"].endswith("step_000001")
    for run in comparison:
        assert run["questions"] == 1 and run["EM"] == 0.0 and run["J"] == 0.0  # random tokens never answer
        assert run["TN"] > 0 and run["ended_by"] == {"round_limit": 1}
    # the same weights (seed 0) and the same sampling seed: the checkpoint plays exactly what the tiny model played
    first, second = (
        _examples(out / f"{name}__agemem" / "examples.jsonl")[0] for name in ("tiny-random-qwen2", "run_step_000001")
    )
    assert first["transcript"] == second["transcript"]
    assert (out / "comparison.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "TC total" in printed and "comparison.md" in printed


def test_a_resumed_run_samples_what_the_uninterrupted_run_sampled(tmp_path):
    from agemem.rollouts.engines.transformers_engine import TransformersEngine
    from agemem.rollouts.policy import load_policy

    model, tokenizer = load_policy(AgeMemConfig().policy)
    overrides = [*TINY, "rollout.stage1_max_steps=0", "eval.chunk_size=1", "eval.plot=false"]  # one step each
    config = load_config(AgeMemConfig, overrides=overrides)

    def run(out, limit):
        config.data.limit = limit
        backend = Backend(TransformersEngine(model, tokenizer), tokenizer)  # a fresh process's engine
        return evaluate_qa(config, out, backends={"tiny-random-qwen2": backend}, encoder=WordSetEncoder())

    run(tmp_path / "whole", 2)
    run(tmp_path / "resumed", 1)
    (resumed,) = run(tmp_path / "resumed", 2)
    assert resumed["played"] == 1 and resumed["resumed"] == 1
    whole, parts = (_examples(tmp_path / name / "examples.jsonl") for name in ("whole", "resumed"))
    assert [e["transcript"] for e in whole] == [e["transcript"] for e in parts]
    assert whole[0]["transcript"] != whole[1]["transcript"]
