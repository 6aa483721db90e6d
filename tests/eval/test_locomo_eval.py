"""`agemem eval locomo` on the real LoCoMo file (shared data, never shipped): scripted agents through the real
driver, environment and scorers. What each variant can see of the conversation decides what it can answer; every
question starts from the conversation's memory; sessions arrive in order with their dates, the context carries
over under its budget; a kill in ingestion or in the questions resumes without redoing finished work; the metrics
per question and category are checked by hand; an LLM judge gives J."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.benchmarks import get_benchmark
from agemem.eval.locomo import STATE_FILE, aggregate, j_scores
from agemem.eval.models import Backend
from agemem.eval.runner import evaluate
from agemem.tasks.locomo import LocomoConfig, load_locomo, question_tasks
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer, call
from tests.fake_endpoint import FakeChatEndpoint
from tests.games_support import needs, needs_shared, shared_data

DATA = shared_data("locomo")
FILE = DATA / "locomo10.json" if DATA else None
pytestmark = [needs_shared("locomo"), needs("locomo", ("nltk",))]  # the floors tier installs only .[dev]

SESSIONS = 3
BASE = [
    "env.summarizer.backend=extractive",
    "logging.progress=false",
    "eval.plot=false",
    "eval.models=[scripted]",
    "locomo.conversations=[conv-26]",
    f"locomo.sessions={SESSIONS}",
]
UNKNOWN = "I do not know"


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


@pytest.fixture(scope="module")
def questions():
    (conversation,) = [c for c in load_locomo(FILE) if c.sample_id == "conv-26"]
    return question_tasks(conversation, LocomoConfig(sessions=SESSIONS))


def _config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*BASE, f"locomo.data={FILE}", *overrides])


def _examples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _latest_user(conversation: list[dict[str, Any]]) -> tuple[int, str]:
    index = max(i for i, m in enumerate(conversation) if m["role"] == "user")
    return index, conversation[index]["content"]


class Reader:
    """Stores every evidence line a session shows (Add_memory), then says OK. Asked a question, it answers the gold
    answer only when one of the question's evidence lines is in front of it (retrieved, or in its context);
    otherwise it retrieves once when it can (top 20), and then says it does not know. ``on_question`` runs first
    on a question's turn and may return a reply of its own (a test's extra behaviour)."""

    def __init__(self, tasks, on_question=None, answers=None):
        self.tasks = {t.question: t for t in tasks}
        self.lines = {f.text for t in tasks for f in t.supporting_facts}
        self.on_question = on_question
        self.answers = answers or {}

    def __call__(self, conversation: list[dict[str, Any]]) -> str:
        index, message = _latest_user(conversation)
        acted = any(m["role"] == "assistant" for m in conversation[index + 1 :])
        if message in self.tasks:
            task = self.tasks[message]
            if self.on_question is not None:
                reply = self.on_question(conversation, index, task)
                if reply is not None:
                    return reply
            if task.question in self.answers:
                return answer(self.answers[task.question])
            seen = "\n".join(m["content"] for i, m in enumerate(conversation) if i != index)
            shown = [(f.text, json.dumps(f.text, ensure_ascii=False)[1:-1]) for f in task.supporting_facts]
            if any(text in seen or escaped in seen for text, escaped in shown):  # in a message, or in a tool's JSON
                return answer(task.answer)
            if not acted and "Retrieve_memory" in conversation[0]["content"]:
                return call(("Retrieve_memory", {"query": message, "top_k": 20}))
            return answer(UNKNOWN)
        found = sorted(line for line in self.lines if line in message)
        if acted or not found:
            return answer("OK")
        return call(*(("Add_memory", {"content": line}) for line in found))


def _evaluate(config, out, tokenizer, policy):
    engine = MessagesEngine(tokenizer, policy)
    runs = evaluate(
        get_benchmark("locomo"),
        config,
        out,
        backends={"scripted": Backend(engine, tokenizer)},
        encoder=WordSetEncoder(dim=65536),
    )
    return runs, engine


def _session_prompts(engine: MessagesEngine) -> list[str]:
    """The latest user message of every request that answered a session, in order."""
    found = []
    for conversation in engine.seen:
        _, message = _latest_user(conversation)
        if message.startswith("[Session "):
            found.append(message.splitlines()[0])
    return found


# --------------------------------------------------------------------------------------------- variants


def test_each_variant_answers_what_its_memory_shows_it(tmp_path, tokenizer, questions):
    reader = Reader(questions)
    config = _config("eval.variants=[agemem,no_memory,full_context,rag]", "eval.rag_top_k=3")
    runs, engine = _evaluate(config, tmp_path, tokenizer, reader)
    by_variant = {r["variant"]: r for r in runs}
    assert {r["questions"] for r in runs} == {len(questions)} == {20}
    # agemem: every evidence line stored in Stage 1, all 18 retrieved (top 20): every question answered
    agemem = by_variant["agemem"]
    assert agemem["J"] == agemem["F1"] == agemem["BLEU1"] == agemem["LoCoMo_F1"] == 100.0
    assert agemem["MQ"] == 1.0
    stored = len(reader.lines)
    assert agemem["ingest"]["memory_entries"] == {"conv-26": stored} and stored == 18
    assert agemem["ingest"]["sessions"] == SESSIONS and agemem["ingest"]["tool_calls"]["Add_memory"] == stored
    # full context: the sessions are in the prompt, nothing ingested
    full = by_variant["full_context"]
    assert full["J"] == 100.0 and full["ingest"] is None and full["TC"]["total"] == 0.0
    # no memory: nothing to read, every answer "I do not know"
    none = by_variant["no_memory"]
    assert none["J"] == none["F1"] == 0.0 and none["ingest"] is None and none["MQ"] is None
    # rag: 3 memories shown per step, whatever the agent asks; only some questions get their evidence line
    rag = by_variant["rag"]
    assert 0.0 < rag["J"] < 100.0 and rag["TC"]["Retrieve_memory"] == 0.0
    # per category: the data's own counts (categories 1-4 of the first 3 sessions' questions)
    counts = {str(c): sum(t.metadata["category"] == c for t in questions) for c in (1, 2, 3, 4)}
    assert {c: s["n"] for c, s in agemem["by_category"].items()} == {c: n for c, n in counts.items() if n}
    # ingestion cost is shared over the conversation's questions: 3 sessions x 2 steps over 20 questions
    assert agemem["ingest_cost"]["agent_calls"] == pytest.approx(3 * 2 / 20)
    assert agemem["cost"]["agent_calls"] == pytest.approx(agemem["answer_cost"]["agent_calls"] + 0.3)
    examples = _examples(tmp_path / "scripted__agemem" / "examples.jsonl")
    assert [e["id"] for e in examples] == [t.id for t in questions]
    assert all(e["conversation"] == "conv-26" and e["j_reason"] == "rule judge's answer score" for e in examples)
    # the session messages came with their dates, in order, once each for the variants that ingest (agemem, rag)
    dates = [f"[Session {n} (" for n in range(1, SESSIONS + 1)]
    headers = _session_prompts(engine)
    assert [h[: len(dates[0])] for h in headers[::2]] == dates * 2  # each session: store, then OK
    assert "1:56 pm on 8 May, 2023" in headers[0]


def test_every_question_starts_from_the_conversations_memory(tmp_path, tokenizer, questions):
    """The agent deletes every memory it retrieves before answering: each later question still retrieves exactly
    what it retrieves when nothing is deleted, and the conversation's memory is whole at the end."""

    def retrieving(delete: bool, found: dict[str, list[str]]):
        def on_question(conversation, index, task):
            after = conversation[index + 1 :]
            results = [m for m in after if m["role"] == "tool" and "Retrieve_memory" in m["content"]]
            if not results:
                return None
            if not any(m["role"] == "assistant" and "Delete_memory" in m["content"] for m in after):
                ids = [memory["memory_id"] for memory in json.loads(results[-1]["content"])["memories"]]
                found[task.id] = ids
                if delete:
                    return call(*(("Delete_memory", {"memory_id": i, "confirmation": True}) for i in ids))
            return answer("done")

        return on_question

    kept: dict[str, list[str]] = {}
    deleted: dict[str, list[str]] = {}
    config = _config("eval.chunk_size=7")  # three chunks, the questions of a chunk played side by side
    _evaluate(config, tmp_path / "kept", tokenizer, Reader(questions, retrieving(False, kept)))
    (results,), _ = _evaluate(config, tmp_path / "deleted", tokenizer, Reader(questions, retrieving(True, deleted)))
    assert deleted == kept and len(kept) == len(questions) and all(kept.values())
    examples = _examples(tmp_path / "deleted" / "examples.jsonl")
    assert all(e["tool_calls"]["Delete_memory"] == len(kept[e["id"]]) for e in examples)
    assert all(len(e["memory"]) == 18 - len(kept[e["id"]]) for e in examples)  # each question edited its own copy
    assert results["ingest"]["memory_entries"] == {"conv-26": 18}


# --------------------------------------------------------------------------------------------- ingestion


def test_the_context_carries_over_sessions_within_its_budget(tmp_path, tokenizer, questions):
    seen_sessions: list[list[str]] = []

    def spy(conversation):
        _, message = _latest_user(conversation)
        if message.startswith("[Session "):
            seen_sessions.append([m["content"][:12] for m in conversation if m["content"].startswith("[Session ")])
        return Reader(questions)(conversation)

    (carried,), _ = _evaluate(_config("data.limit=1"), tmp_path / "carry", tokenizer, spy)
    heads = [f"[Session {n} (" for n in (1, 2, 3)]
    assert seen_sessions[::2] == [heads[:1], heads[:2], heads]
    assert carried["ingest"]["dropped_messages"] == 0
    seen_sessions.clear()
    _evaluate(_config("data.limit=1", "locomo.session_context=reset"), tmp_path / "reset", tokenizer, spy)
    assert seen_sessions[::2] == [[f"[Session {n} ("] for n in (1, 2, 3)]
    # a budget smaller than two sessions: the oldest rounds go before the next session arrives
    seen_sessions.clear()
    (tight,), _ = _evaluate(
        _config("data.limit=1", "env.context.max_context_tokens=1800"), tmp_path / "tight", tokenizer, spy
    )
    assert seen_sessions[2] == ["[Session 2 ("] and seen_sessions[4] == ["[Session 3 ("]
    state = json.loads((tmp_path / "tight" / STATE_FILE).read_text())
    sessions = state["sessions"]
    # all of the previous session's round went (its message, the agent's calls, their results, its OK)
    assert [s["dropped_messages"] for s in sessions] == [0] + [s["context_messages"] - 1 for s in sessions[:-1]]
    assert tight["ingest"]["dropped_messages"] == sum(s["dropped_messages"] for s in sessions) > 0
    carried_state = json.loads((tmp_path / "carry" / STATE_FILE).read_text())
    assert sessions[-1]["context_tokens"] < carried_state["sessions"][-1]["context_tokens"]


class KilledError(Exception):
    pass


def _killing(policy, after_calls: int):
    calls = {"n": 0}

    def reply(conversation):
        calls["n"] += 1
        if calls["n"] > after_calls:
            raise KilledError
        return policy(conversation)

    return reply


def test_a_kill_during_ingestion_resumes_at_the_last_finished_session(tmp_path, tokenizer, questions):
    (whole,), _ = _evaluate(_config(), tmp_path / "whole", tokenizer, Reader(questions))
    with pytest.raises(KilledError):
        _evaluate(_config(), tmp_path / "killed", tokenizer, _killing(Reader(questions), 3))  # in session 2
    state = json.loads((tmp_path / "killed" / STATE_FILE).read_text())
    assert state["done"] == {"conv-26": 1} and len(state["sessions"]) == 1
    assert [p.name for p in (tmp_path / "killed" / "ingest").glob("*.npz")] == ["memory_round_0001.npz"]
    (resumed,), engine = _evaluate(_config(), tmp_path / "killed", tokenizer, Reader(questions))
    assert [h[:12] for h in _session_prompts(engine)] == ["[Session 2 ("] * 2 + ["[Session 3 ("] * 2
    assert resumed["J"] == whole["J"] == 100.0 and resumed["played"] == 20
    assert resumed["ingest"]["memory_entries"] == whole["ingest"]["memory_entries"]
    # memories carry their creation time, so prompt lengths (and costs) differ by a few digits between runs
    strip = ("cost", "ingest_cost", "answer_cost", "stage3_prompt_tokens")
    first, second = (_examples(tmp_path / name / "examples.jsonl") for name in ("whole", "killed"))
    assert [{k: v for k, v in e.items() if k not in strip} for e in first] == [
        {k: v for k, v in e.items() if k not in strip} for e in second
    ]


def test_a_kill_during_the_questions_resumes_without_ingesting_again(tmp_path, tokenizer, questions):
    config = _config("eval.chunk_size=5")
    # 3 sessions x 2 calls, then chunks of 5 questions x 2 calls: killed in the third chunk
    with pytest.raises(KilledError):
        _evaluate(config, tmp_path, tokenizer, _killing(Reader(questions), 6 + 2 * 10 + 3))
    assert len(_examples(tmp_path / "examples.jsonl")) == 10
    (results,), engine = _evaluate(config, tmp_path, tokenizer, Reader(questions))
    assert _session_prompts(engine) == [] and results["played"] == 10 and results["resumed"] == 10
    assert results["J"] == 100.0 and results["ingest"]["sessions"] == SESSIONS


@pytest.fixture
def toy_system():
    """A memory system that keeps every message it observes verbatim (tests/eval/toy_memory.py), as a variant."""
    from agemem.eval.baselines.endpoint import UsageMeter
    from agemem.eval.memory_systems import MemorySystemSpec, register_memory_system, unregister_memory_system
    from tests.eval.toy_memory import ListSystem

    built: list[ListSystem] = []

    def build(llm, config, encoder, folder):
        built.append(ListSystem(UsageMeter()))
        return built[-1]

    register_memory_system(MemorySystemSpec("toy", "Toy", build))
    try:
        yield built
    finally:
        unregister_memory_system("toy")


def test_a_memory_system_takes_each_session_in_once_and_a_resumed_run_restores_it(
    tmp_path, tokenizer, questions, toy_system
):
    config = _config("eval.variants=[toy]", "eval.chunk_size=5", "eval.rag_top_k=3")
    # the agent does not act in ingestion, and answers each question at once (the search shows the evidence):
    # one call per question, killed in the second chunk
    with pytest.raises(KilledError):
        _evaluate(config, tmp_path, tokenizer, _killing(Reader(questions), 5 + 1))
    (first,) = toy_system
    held = first.held["locomo/conv-26"]
    assert [text.splitlines()[0][:12] for text in held] == [f"[Session {n} (" for n in (1, 2, 3)]
    (results,), engine = _evaluate(config, tmp_path, tokenizer, Reader(questions))
    second = toy_system[1]
    assert second.held["locomo/conv-26"] == held and second.meter.calls == 0  # restored, never observed again
    assert _session_prompts(engine) == [] and results["played"] == 15
    # the toy search shows the sessions sharing a word with the question: a question is answered when one of them
    # holds its evidence (19 of 20 here; the other shares no word with the session that answers it)
    shown = {t.id: [text for text in held if set(t.question.split()) & set(text.split())][:3] for t in questions}
    answerable = [t for t in questions if any(f.text in text for f in t.supporting_facts for text in shown[t.id])]
    assert results["J"] == pytest.approx(100 * len(answerable) / 20) and len(answerable) == 19
    assert results["TC"]["total"] == 0.0
    assert first.meter.calls == 3 and results["ingest"]["steps"] == 0  # one observe per session, no agent step
    assert results["ingest"]["sessions"] == 3 and results["ingest_cost"]["agent_calls"] == 0.0


# --------------------------------------------------------------------------------------------- metrics


def test_metrics_per_question_and_category_by_hand(tmp_path, tokenizer):
    (conversation,) = [c for c in load_locomo(FILE) if c.sample_id == "conv-26"]
    tasks = question_tasks(conversation, LocomoConfig(categories=[1, 2, 3, 4, 5], sessions=SESSIONS))
    adversarial = [t for t in tasks if t.metadata["category"] == 5]
    temporal = next(t for t in tasks if t.answer == "7 May 2023")
    answers = {temporal.question: "7 May"}  # one partial answer
    answers |= {t.question: "That was not mentioned in the conversation" for t in adversarial}
    config = _config("locomo.categories=[1,2,3,4,5]")
    (results,), _ = _evaluate(config, tmp_path, tokenizer, Reader(tasks, answers=answers))
    examples = {e["id"]: e for e in _examples(tmp_path / "examples.jsonl")}
    partial = examples[temporal.id]
    # Mem0's F1 over token sets: {7, may} vs {7, may, 2023}: P = 2/2, R = 2/3, F1 = 2·1·(2/3)/(1 + 2/3) = 0.8
    assert partial["mem0_f1"] == pytest.approx(0.8)
    # BLEU-1: 2 of 2 unigrams match, brevity penalty exp(1 - 3/2) = 0.6065
    assert partial["bleu1"] == pytest.approx(0.6065, abs=1e-4)
    # LoCoMo's F1 (stemmed, category 2 plain): the same tokens, P = 1, R = 2/3: 0.8
    assert partial["locomo_f1"] == pytest.approx(0.8)
    for task in adversarial:
        record = examples[task.id]
        assert record["locomo_f1"] == 1.0 and record["j"] is None and record["mem0_f1"] is None
    n = sum(1 for t in tasks if t.metadata["category"] != 5)
    # overall (categories 1-4): every question right but the partial one
    assert results["F1"] == pytest.approx(100 * (n - 1 + 0.8) / n)
    assert results["J"] == pytest.approx(100 * (n - 1 + partial["judge"]) / n)
    assert results["adversarial"]["n"] == len(adversarial) > 0 and results["adversarial"]["LoCoMo_F1"] == 100.0
    # LoCoMo's overall counts category 5 too
    assert results["LoCoMo_F1"] == pytest.approx(100 * (len(tasks) - 1 + 0.8) / len(tasks))
    category = str(temporal.metadata["category"])
    in_category = sum(1 for t in tasks if str(t.metadata["category"]) == category)
    assert results["by_category"][category]["F1"] == pytest.approx(100 * (in_category - 1 + 0.8) / in_category)


def test_j_with_an_llm_judge_under_mem0s_rubric(tmp_path, tokenizer, questions):
    replies = iter(['{"label": "CORRECT"}', "WRONG.", "no idea"] * 100)

    def reply(body, number):
        if body["messages"][0]["content"].startswith("You grade"):
            return 200, "Score: 1"  # memory quality, asked with the judge's own rubric
        assert body["messages"][0]["content"].startswith("You check answers to questions about a long-running")
        return 200, next(replies)

    endpoint = FakeChatEndpoint(reply)
    try:
        judge = [
            "reward.judge.backend=openai",
            "reward.judge.model=judge",
            f"reward.judge.base_url={endpoint.url}",
            "reward.judge.concurrency=1",
            "data.limit=6",
        ]
        (results,), _ = _evaluate(_config(*judge), tmp_path, tokenizer, Reader(questions))
    finally:
        endpoint.close()
    examples = _examples(tmp_path / "examples.jsonl")
    verdicts = [e["j"] for e in examples]
    assert sorted(verdicts, key=str) == sorted([1.0, 0.0, None, 1.0, 0.0, None], key=str)
    assert results["j_unreadable"] == 2 and results["J"] == 50.0  # 2 CORRECT of 4 readable
    assert results["judge"]["name"] == "llm:judge" and results["judge"]["fallbacks"] == 0
    # per question: the answer score of the judge's own rubric, J under Mem0's, MQ per evidence turn
    assert results["judge"]["requests"] == 2 * 6 + sum(len(t.supporting_facts) for t in questions[:6])


def test_j_scores_leave_category_5_out_and_count_no_answer_wrong():
    records = [
        {"category": 5, "answer": "x", "question": "q", "gold": "g", "judge": 1.0},
        {"category": 1, "answer": None, "question": "q", "gold": "g", "judge": 0.0},
        {"category": 2, "answer": "g", "question": "q", "gold": "g", "judge": 0.75},
    ]
    assert [j for j, _ in j_scores(records, judge=object())] == [None, 0.0, 0.75]
    verdicts = j_scores(records, object())
    rows = [{**r, "j": j, "locomo_f1": 1.0, "mem0_f1": 0.5, "bleu1": 0.5} for r, (j, _) in zip(records, verdicts)]
    for row in rows:
        row.update(mq=None, stage3_prompt_tokens=0, stage3_steps=0, tool_calls={}, cost={}, answer_cost={})
        row.update(ingest_cost={}, ended_by="answer")
    summary = aggregate(rows)
    assert summary["J"] == pytest.approx(100 * 0.75 / 2) and summary["adversarial"]["J"] is None


# --------------------------------------------------------------------------------------------- setup


def test_bad_setups_are_errors_that_say_the_fix(tmp_path, tokenizer, questions):
    with pytest.raises(ConfigError, match=r"locomo10\.json"):
        _evaluate(_config("locomo.data=/nowhere/locomo10.json"), tmp_path / "a", tokenizer, Reader(questions))
    with pytest.raises(ConfigError, match="conv-99"):
        _evaluate(_config("locomo.conversations=[conv-99]"), tmp_path / "b", tokenizer, Reader(questions))
    # a checkpoint's own training source (HotpotQA here) gives way to LoCoMo's file
    (results,), _ = _evaluate(
        _config("data.source=hotpotqa", "data.limit=1"), tmp_path / "c", tokenizer, Reader(questions)
    )
    assert results["questions"] == 1 and results["config"]["data"]["source"] == "locomo"


def test_without_nltk_the_run_stops_before_ingesting_and_names_the_extra(tmp_path, tokenizer, questions, monkeypatch):
    import sys

    from agemem.eval import locomo_metrics

    monkeypatch.setitem(sys.modules, "nltk.stem", None)  # `from nltk.stem import ...` now raises ImportError
    locomo_metrics._nltk.cache_clear()
    engine = MessagesEngine(tokenizer, Reader(questions))
    with pytest.raises(ConfigError, match=r"pip install 'agemem\[locomo\]'"):
        evaluate(get_benchmark("locomo"), _config(), tmp_path, backends={"scripted": Backend(engine, tokenizer)})
    assert engine.seen == [] and not (tmp_path / "ingest").exists()
    monkeypatch.undo()
    locomo_metrics._nltk.cache_clear()  # NLTK back for the next tests


def test_the_command_line_takes_the_data_and_conversations(tmp_path):
    from agemem.entrypoints.cli import _eval_overrides, build_parser

    args = build_parser().parse_args(
        ["eval", "locomo", "--data", str(FILE), "--conversations", "conv-26, conv-30", "--limit", "4"]
    )
    overrides = _eval_overrides(args)
    assert f"locomo.data={FILE}" in overrides and "data.limit=4" in overrides
    assert 'locomo.conversations=["conv-26", "conv-30"]' in overrides
    config = load_config(AgeMemConfig, overrides=overrides)
    assert config.locomo.conversations == ["conv-26", "conv-30"]


# --------------------------------------------------------------------------------------------- slow: whole talks


@pytest.mark.slow
def test_two_whole_conversations_ingested_side_by_side_and_resumed_after_a_kill(tmp_path, tokenizer):
    """conv-26 (19 sessions) and conv-30 (19 sessions) in full: one session of each per round, killed in round 7,
    resumed; every session recorded once, each conversation's memory holds its own evidence lines only, and every
    question starts from its conversation's whole memory."""
    conversations = {c.sample_id: c for c in load_locomo(FILE) if c.sample_id in ("conv-26", "conv-30")}
    tasks = [t for c in conversations.values() for t in question_tasks(c, LocomoConfig())]
    reader = Reader(tasks)
    lines = {
        sample: {f.text for t in tasks if t.metadata["conversation"] == sample for f in t.supporting_facts}
        for sample in conversations
    }
    config = _config("locomo.conversations=[conv-26,conv-30]", "locomo.sessions=0", "eval.chunk_size=64")
    # per round: 2 conversations x (store, OK) = 4 engine calls; killed in round 7
    with pytest.raises(KilledError):
        _evaluate(config, tmp_path, tokenizer, _killing(reader, 4 * 6 + 2))
    state = json.loads((tmp_path / STATE_FILE).read_text())
    assert state["done"] == {"conv-26": 6, "conv-30": 6} and state["rounds"] == 6
    (results,), engine = _evaluate(config, tmp_path, tokenizer, reader)
    state = json.loads((tmp_path / STATE_FILE).read_text())
    played = [(s["conversation"], s["session"]) for s in state["sessions"]]
    expected = {(sample, n) for sample, c in conversations.items() for n in range(1, len(c.sessions) + 1)}
    assert len(played) == len(set(played)) and set(played) == expected
    assert [h[:12] for h in _session_prompts(engine)][:4] == ["[Session 7 ("] * 4  # resumed at session 7
    assert results["ingest"]["memory_entries"] == {sample: len(found) for sample, found in lines.items()}
    examples = _examples(tmp_path / "examples.jsonl")
    assert len(examples) == len(tasks) == results["questions"]
    for example in examples:
        own = lines[example["conversation"]]
        assert len(example["memory"]) == len(own) and set(example["memory"]) == own
    assert results["J"] > 50.0 and results["MQ"] == 1.0  # every evidence line stored; retrieval finds most


def test_compare_puts_locomo_in_its_own_column_beside_the_published_rows(tmp_path, tokenizer, questions):
    from agemem.eval.compare import compare

    config = _config("eval.variants=[agemem,no_memory]", "data.limit=4", "eval.bootstrap_samples=0")
    engine = MessagesEngine(tokenizer, Reader(questions))
    comparison = compare(
        {"locomo": config},
        tmp_path,
        reference=True,
        backends={"scripted": Backend(engine, tokenizer)},
        encoder=WordSetEncoder(dim=65536),
        announce=lambda _: None,
    )
    assert [(c["name"], c["metric"], c["items"]) for c in comparison["columns"] if c["name"] == "locomo"] == [
        ("locomo", "J", 4)
    ]
    assert {r["method"]: r["values"]["locomo"] for r in comparison["rows"]} == {"AgeMem": 100.0, "No-Memory": 0.0}
    published = {row["method"]: (row["J"], row["F1"]) for row in comparison["reference_locomo"]["rows"]}
    assert published["Mem0"] == (66.88, None) and published["Memory-R1"] == (62.74, 45.02)
    markdown = (tmp_path / "comparison.md").read_text()
    assert "LoCoMo (J, rule judge)" in markdown and "published LoCoMo numbers (other papers' setups" in markdown
