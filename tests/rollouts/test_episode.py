"""The three-stage episode and the batched driver, with a scripted engine.

The scripted policy stores every Stage-1 message, acknowledges (or filters / summarises)
Stage-2 messages, and retrieves then answers in Stage 3; tests read the trajectories and
the decoded prompts to check what the agent saw at every step.
"""

from __future__ import annotations

import json

import pytest

from agemem.core.chat import render_chat
from agemem.core.configlib import load_config
from agemem.core.context import SUMMARY_PREFIX
from agemem.core.env import MemoryEnv
from agemem.core.text import contains_answer
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.build import build_driver, build_resources, distractors_for
from agemem.rollouts.distractors import CorpusDistractors, DistractorCache, TaskDistractors, prepare_distractors
from agemem.rollouts.episode import Episode
from agemem.rollouts.messages import stage1_messages
from agemem.rollouts.records import TrajectoryWriter, read_trajectories
from agemem.tasks.hotpotqa import load_hotpotqa
from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.conftest import WordSetEncoder
from tests.rollouts.scripted import MemoryAgent, ScriptedEngine, parse_chatml

BASE = [
    "distractors.generator=task",
    "distractors.cache_dir=",
    "rollout.paragraphs_per_turn=1",
    "rollout.rollouts_per_task=1",
]


def make_config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*BASE, *overrides])


def play(tasks, config, policy, qwen_tokenizer, *, distractors=None, writer=None):
    encoder = WordSetEncoder()
    resources = build_resources(config.env, qwen_tokenizer, encoder=encoder)
    distractors = distractors or distractors_for(config.distractors, tasks, encoder)
    engine = ScriptedEngine(qwen_tokenizer, policy)
    driver = build_driver(config.rollout, config.sampling, engine, qwen_tokenizer, resources, progress=False)
    return driver.run(tasks, distractors, writer=writer), engine, resources


def conversation(step, tokenizer):
    return parse_chatml(tokenizer.decode(step.prompt_ids))


@pytest.fixture(scope="module")
def tasks():
    return generate_synthetic_tasks(2, seed=3)


def test_stages_run_in_order_with_stm_reset_only_before_stage2(tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config(), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    task = tasks[0]
    stages = [s.stage for s in trajectory.steps]
    assert stages == sorted(stages) and set(stages) == {1, 2, 3}
    # 3 fact turns x (Add_memory, OK) + 5 distractors x OK + (Retrieve, answer)
    assert [len(trajectory.stage_steps(s)) for s in (1, 2, 3)] == [6, 5, 2]
    assert trajectory.ended_by == "answer" and trajectory.answer == task.answer

    first_stage2 = conversation(trajectory.stage_steps(2)[0], qwen_tokenizer)
    assert [m["role"] for m in first_stage2] == ["system", "user"]  # STM reset: no Stage-1 message survives
    assert first_stage2[1]["content"] == task.distractors[0]

    first_stage3 = conversation(trajectory.stage_steps(3)[0], qwen_tokenizer)
    users = [m["content"] for m in first_stage3 if m["role"] == "user" and "<tool_response>" not in m["content"]]
    assert users == [*task.distractors, task.question]  # no reset before Stage 3
    assert not any(p.text in m["content"] for p in task.contexts for m in first_stage3)


def test_ltm_persists_from_stage1_into_stage3(tasks, qwen_tokenizer):
    result, _, resources = play(tasks[:1], make_config(), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    stored = trajectory.stats.ops("add", stage=1)
    assert len(stored) == 3 and all(op.ok for op in stored)
    retrieve = trajectory.stage_steps(3)[0]
    assert retrieve.tool_calls[0]["name"] == "Retrieve_memory"
    retrieved = [m["content"] for m in retrieve.tool_results[0]["memories"]]
    gold = trajectory.final_memory
    assert len(gold) == 3 and {m["content"] for m in gold} == {op.content for op in stored}
    assert any(contains_answer(text, tasks[0].answer) for text in retrieved)
    assert all(m["metadata"]["stage"] == 1 for m in gold)
    assert all(resources.ltm.entries(scope=s) == [] for s in resources.ltm.scopes())  # rollout scopes are cleared


def test_introspective_retrieval_shows_stored_memories_before_each_turn(tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config("rollout.introspective_top_k=2"), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    # turn 0 arrives with an empty LTM (nothing shown); turns 1 and 2 each see up to 2 memories
    assert [len(r.memory_ids) for r in trajectory.stats.introspections] == [1, 2]
    turn1 = next(s for s in trajectory.stage_steps(1) if s.turn == 1)
    messages = conversation(turn1, qwen_tokenizer)
    assert '"source": "introspection"' in messages[-1]["content"]
    first_fact = trajectory.stats.ops("add")[0].content
    assert json.dumps(first_fact)[1:-1] in messages[-1]["content"]
    assert [r.stage for r in trajectory.stats.retrievals] == [3]  # the agent's own retrievals are counted apart


@pytest.mark.parametrize("override", ["rollout.introspective_top_k=0", "rollout.stage1_mode=single"])
def test_introspection_off(override, tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config(override), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    assert trajectory.stats.introspections == []
    if override.endswith("single"):
        (first,) = [s for s in trajectory.stage_steps(1) if s.turn == 0][:1]
        user = conversation(first, qwen_tokenizer)[1]["content"]
        assert all(p.text in user for p in tasks[0].contexts)
        assert {s.turn for s in trajectory.stage_steps(1)} == {0}


def test_round_limits_are_recorded_and_later_turns_still_arrive(tasks, qwen_tokenizer):
    config = make_config(
        "rollout.max_steps_per_turn=2",
        "rollout.stage1_max_steps=5",
        "rollout.stage2_max_steps=0",
        "rollout.stage3_max_steps=2",
    )
    result, _, _ = play(tasks[:1], config, lambda conversation: "I will not follow the format", qwen_tokenizer)
    (trajectory,) = result.trajectories
    assert [len(trajectory.stage_steps(s)) for s in (1, 2, 3)] == [5, 0, 2]  # turn caps 2 + 2, then the stage cap
    expected = [(1, 0, "turn"), (1, 1, "turn"), (1, 2, "stage")] + [(2, t, "stage") for t in range(5)]
    expected.append((3, 0, "stage"))
    assert [(h["stage"], h["turn"], h["limit"]) for h in trajectory.limit_hits] == expected
    assert trajectory.ended_by == "round_limit" and trajectory.answer is None
    assert all("no_action" in s.violations for s in trajectory.steps)
    stage3 = conversation(trajectory.stage_steps(3)[0], qwen_tokenizer)
    assert sum(m["content"] in tasks[0].distractors for m in stage3) == 5  # unanswered distractors still arrived


def test_overflow_is_recorded_not_fatal(tasks, qwen_tokenizer):
    result, _, _ = play(
        tasks[:1], make_config("env.context.max_context_tokens=700"), MemoryAgent(tasks), qwen_tokenizer
    )
    (trajectory,) = result.trajectories
    stats = trajectory.stats
    assert stats.overflow and stats.overflow_steps and stats.max_context_tokens > 700
    assert stats.first_overflow_step <= min(stats.overflow_steps)
    over = [s for s in trajectory.steps if s.context_tokens > 700]
    assert over and trajectory.ended_by == "answer"


def test_hard_prompt_cap_ends_the_episode(tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config("rollout.max_prompt_tokens=900"), MemoryAgent(tasks), qwen_tokenizer)
    (trajectory,) = result.trajectories
    assert trajectory.ended_by == "prompt_too_long" and "900" in trajectory.error
    assert all(s.context_tokens <= 900 for s in trajectory.steps)


def test_engine_error_ends_only_that_episode(tasks, qwen_tokenizer):
    config = make_config()
    encoder = WordSetEncoder()
    resources = build_resources(config.env, qwen_tokenizer, encoder=encoder)
    engine = ScriptedEngine(
        qwen_tokenizer, MemoryAgent(tasks), fail_on=lambda c: any(m["content"] == tasks[0].question for m in c)
    )
    driver = build_driver(config.rollout, config.sampling, engine, qwen_tokenizer, resources, progress=False)
    first, second = driver.run(tasks, distractors_for(config.distractors, tasks, encoder)).trajectories
    assert first.ended_by == "engine_error" and first.error == "scripted failure" and first.answer is None
    assert second.ended_by == "answer" and second.answer == tasks[1].answer


def test_prompt_ids_decode_to_the_context_the_env_held(tasks, qwen_tokenizer):
    """Drive one episode by hand and compare every request with the live environment."""
    config = make_config("env.summarizer.backend=policy")
    resources = build_resources(config.env, qwen_tokenizer, encoder=WordSetEncoder())
    engine = ScriptedEngine(qwen_tokenizer, MemoryAgent(tasks, stage2="summary"))
    driver = build_driver(config.rollout, config.sampling, engine, qwen_tokenizer, resources, progress=False)
    env = MemoryEnv(resources, scope="by-hand")
    task = tasks[0]
    run = Episode(task, task.distractors, env, driver.setup, 0).play()
    requests = []
    try:
        request = next(run)
        while True:
            requests.append(request)
            if request.kind == "action":
                expected = render_chat(qwen_tokenizer, env.prompt_messages(), env.tools)
                assert request.messages == env.prompt_messages()
                assert env.context_tokens() == len(request.prompt_ids)  # the env may reuse the prompt's length
            else:  # a policy-written summary: the summarizer's prompt over the span
                expected = render_chat(qwen_tokenizer, request.messages)
                assert "Transcript:" in request.messages[-1]["content"]
            assert qwen_tokenizer.decode(request.prompt_ids) == expected
            (completion,) = engine.generate([request.prompt_ids], driver.sampling)
            request = run.send(completion)
    except StopIteration as finished:
        trajectory = finished.value
    assert [s.prompt_ids for s in trajectory.steps] == [r.prompt_ids for r in requests]
    assert {s.kind for s in trajectory.steps} == {"action", "summary"}
    assert trajectory.stats.summaries and all(s.stage == 2 for s in trajectory.stats.summaries)
    after = conversation(trajectory.stage_steps(3)[0], qwen_tokenizer)
    assert any(m["content"].startswith(SUMMARY_PREFIX + "The gist of it.") for m in after)


def test_policy_summaries_share_engine_calls_with_other_episodes(qwen_tokenizer):
    # a 2-entity and a 3-entity task: the second is one Stage-1 turn behind, so its actions
    # meet the first one's summary requests in the same tick
    short = generate_synthetic_tasks(1, seed=5, entities_per_task=2)
    long = generate_synthetic_tasks(2, seed=6, entities_per_task=3)[1:]
    tasks = short + long
    config = make_config("env.summarizer.backend=policy")
    result, engine, _ = play(tasks, config, MemoryAgent(tasks, stage2="summary"), qwen_tokenizer)
    assert any({"summary", "action"} <= set(kinds) for kinds in engine.calls)
    assert [len(kinds) for kinds in engine.calls].count(2) >= len(engine.calls) - 2  # in lockstep but for the tail
    for trajectory in result.trajectories:
        summaries = [s for s in trajectory.steps if s.kind == "summary"]
        assert len(summaries) == len(trajectory.stats.summaries) == 5
        assert trajectory.ended_by == "answer"


def test_filter_in_stage2_removes_distractors_before_the_question(tasks, qwen_tokenizer):
    result, _, _ = play(tasks[:1], make_config(), MemoryAgent(tasks, stage2="filter"), qwen_tokenizer)
    (trajectory,) = result.trajectories
    stage3 = conversation(trajectory.stage_steps(3)[0], qwen_tokenizer)
    assert not any(m["content"] in tasks[0].distractors for m in stage3)
    users = [m["content"] for m in stage3 if m["role"] == "user" and "<tool_response>" not in m["content"]]
    assert users == [tasks[0].question]
    assert len(trajectory.stats.filters) == 5


def test_distractors_are_shared_by_the_k_rollouts_and_differ_across_tasks(qwen_tokenizer, tmp_path):
    tasks = generate_synthetic_tasks(4, seed=9)
    config = make_config("distractors.generator=corpus", f"distractors.cache_dir={tmp_path}", "distractors.count=3")
    distractors = distractors_for(config.distractors, tasks[:2], WordSetEncoder(), pool=tasks)
    config.rollout.rollouts_per_task = 3
    result, _, _ = play(tasks[:2], config, MemoryAgent(tasks), qwen_tokenizer, distractors=distractors)
    by_task = {}
    for trajectory in result.trajectories:
        shown = [
            m["content"]
            for m in conversation(trajectory.stage_steps(3)[0], qwen_tokenizer)
            if m["role"] == "user" and m["content"] != trajectory.question and "<tool_response>" not in m["content"]
        ]
        assert shown == trajectory.distractors == distractors[trajectory.task_id]
        by_task.setdefault(trajectory.task_id, []).append(tuple(shown))
    assert [len(set(group)) for group in by_task.values()] == [1, 1]  # identical within a task ...
    first, second = (group[0] for group in by_task.values())
    assert len(first) == 3 and set(first).isdisjoint(second)  # ... and different across tasks


def test_distractors_are_generated_once_per_task_and_cached(tmp_path):
    tasks = generate_synthetic_tasks(3, seed=1)

    class Counting(TaskDistractors):
        calls = 0

        def generate(self, task, count):
            Counting.calls += 1
            return super().generate(task, count)

    cache = DistractorCache(tmp_path)
    first = prepare_distractors(tasks + tasks, Counting(), 4, cache)
    assert Counting.calls == 3 and all(len(v) == 4 for v in first.values())

    class Exploding(TaskDistractors):
        def generate(self, task, count):
            raise AssertionError("the cache should have answered")

    assert prepare_distractors(tasks, Exploding(), 4, cache) == first
    assert len(list(tmp_path.glob("*.json"))) == 3


def test_corpus_distractors_never_reveal_the_answer():
    tasks = load_hotpotqa("bundled:hotpotqa", limit=30)
    generator = CorpusDistractors(tasks, WordSetEncoder(dim=20_000))
    for task in tasks[:10]:
        chosen = generator.generate(task, 5)
        assert len(chosen) == 5
        own = {p.title for p in task.contexts}
        for text in chosen:
            assert not contains_answer(text, task.answer)
            assert not any(title in text for title in own)
        assert chosen == CorpusDistractors(tasks, WordSetEncoder(dim=20_000)).generate(task, 5)  # deterministic


def test_stage1_messages_are_the_same_for_every_rollout_and_spread_over_turns():
    (task,) = generate_synthetic_tasks(1, seed=2, entities_per_task=4)
    turns = stage1_messages(task, "turns", 3)
    assert len(turns) == 2 and turns == stage1_messages(task, "turns", 3)
    assert all(p.text in "\n".join(turns) for p in task.contexts)
    (single,) = stage1_messages(task, "single", 3)
    assert single.count("\n\n") == 4  # header + one block per paragraph


def test_driver_bounds_live_episodes_orders_results_and_writes_jsonl(tasks, qwen_tokenizer, tmp_path):
    config = make_config("rollout.rollouts_per_task=3", "rollout.max_live_episodes=2")
    with TrajectoryWriter(tmp_path / "t.jsonl") as writer:
        result, engine, resources = play(tasks, config, MemoryAgent(tasks), qwen_tokenizer, writer=writer)
    assert max(len(kinds) for kinds in engine.calls) == 2
    assert [(t.task_id, t.rollout_index) for t in result.trajectories] == [
        (task.id, k) for task in tasks for k in range(3)
    ]
    assert result.stats.episodes == 6 and result.stats.steps == sum(len(t.steps) for t in result.trajectories)
    assert all(resources.ltm.entries(scope=s) == [] for s in resources.ltm.scopes())
    back = list(read_trajectories(tmp_path / "t.jsonl"))
    assert sorted(json.dumps(t.to_json(), sort_keys=True) for t in back) == sorted(
        json.dumps(t.to_json(), sort_keys=True) for t in result.trajectories
    )
    with (tmp_path / "t.jsonl").open("a") as handle:  # a run killed mid-write leaves a torn line
        handle.write('{"task_id": "x", "ste')
    assert len(list(read_trajectories(tmp_path / "t.jsonl"))) == 6


def test_missing_distractors_are_a_clear_error(tasks, qwen_tokenizer):
    config = make_config()
    resources = build_resources(config.env, qwen_tokenizer, encoder=WordSetEncoder())
    driver = build_driver(
        config.rollout, config.sampling, ScriptedEngine(qwen_tokenizer, MemoryAgent(tasks)), qwen_tokenizer, resources
    )
    with pytest.raises(KeyError, match="no distractors for task"):
        driver.run(tasks, {})


def test_a_task_listed_twice_gets_separate_memory_banks(tasks, qwen_tokenizer):
    result, _, _ = play([tasks[0], tasks[0]], make_config(), MemoryAgent(tasks), qwen_tokenizer)
    first, second = result.trajectories
    assert len(first.final_memory) == len(second.final_memory) == 3  # each stored its own three facts


def test_memory_ids_are_the_same_in_every_run(tasks, qwen_tokenizer):
    config = make_config()
    encoder = WordSetEncoder()
    resources = build_resources(config.env, qwen_tokenizer, encoder=encoder)
    driver = build_driver(
        config.rollout, config.sampling, ScriptedEngine(qwen_tokenizer, MemoryAgent(tasks)), qwen_tokenizer, resources
    )
    driver.progress = False
    distractors = distractors_for(config.distractors, tasks, encoder)
    first, again = (driver.run(tasks, distractors).trajectories for _ in range(2))
    assert [[m["memory_id"] for m in t.final_memory] for t in first] == [
        [m["memory_id"] for m in t.final_memory] for t in again
    ]
    assert resources.ltm._sequences == {}  # cleared scopes leave nothing behind


def test_config_sampling_reaches_every_engine_call(tasks, qwen_tokenizer):
    config = make_config(
        "sampling.temperature=0.7",
        "sampling.top_p=0.9",
        "sampling.top_k=5",
        "sampling.max_tokens=77",
        "sampling.seed=3",
    )
    seen = []

    class Recording(ScriptedEngine):
        def generate(self, prompts, sampling, *, messages=None):
            seen.append(sampling)
            return super().generate(prompts, sampling, messages=messages)

    encoder = WordSetEncoder()
    resources = build_resources(config.env, qwen_tokenizer, encoder=encoder)
    engine = Recording(qwen_tokenizer, MemoryAgent(tasks))
    driver = build_driver(config.rollout, config.sampling, engine, qwen_tokenizer, resources, progress=False)
    driver.run(tasks[:1], distractors_for(config.distractors, tasks[:1], encoder))
    assert seen and {(s.temperature, s.top_p, s.top_k, s.max_tokens, s.seed) for s in seen} == {(0.7, 0.9, 5, 77, 3)}
    assert {s.stop_token_ids for s in seen} == {(151645,)}  # the chat template's end of turn


def test_writer_starts_afresh_or_resumes_past_a_torn_line(tasks, qwen_tokenizer, tmp_path):
    path = tmp_path / "t.jsonl"
    result, _, _ = play(tasks, make_config(), MemoryAgent(tasks), qwen_tokenizer)
    first, second = result.trajectories
    with TrajectoryWriter(path) as writer:
        writer.write(first)
    with path.open("a") as handle:
        handle.write('{"task_id": "torn')  # killed mid-line
    with TrajectoryWriter(path, append=True) as writer:  # resume: the torn line is cut, not glued onto
        writer.write(second)
    assert [t.task_id for t in read_trajectories(path)] == [first.task_id, second.task_id]
    with TrajectoryWriter(path) as writer:  # a fresh run replaces the file
        writer.write(second)
    assert [t.task_id for t in read_trajectories(path)] == [second.task_id]
