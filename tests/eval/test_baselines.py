"""The memory-system baselines (``--variant mem0 | mem0g | amem | langmem``): the endpoint their LLM calls go
through, the store adapter and its cost booking, and each real library end to end on HotpotQA with a scripted
model that answers the libraries' own prompts (what each stores, what the agent is shown, what it cost).

The same libraries behind a real ``transformers serve`` process are in ``test_baselines_server.py``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import httpx
import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.config import EnvConfig, SummarizerConfig
from agemem.core.configlib import ConfigError, load_config
from agemem.core.env import EnvResources, MemoryEnv
from agemem.core.memory import ObservingMemory
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.baselines import MEMORY_SYSTEMS, SystemMemory
from agemem.eval.baselines.endpoint import (
    EngineServer,
    UsageMeter,
    chat_messages,
    check_reachable,
    parse_tool_calls,
)
from agemem.eval.models import Backend
from agemem.eval.qa import evaluate_qa
from agemem.eval.variants import apply_variant
from agemem.rollouts.engines.base import SamplingParams
from agemem.rollouts.engines.chat import EngineChat
from agemem.tasks import load_tasks
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine
from tests.eval.memory_models import MEM0G_ENTITIES, MemorySystemsModel, tool_call
from tests.eval.toy_memory import ListSystem

if importlib.util.find_spec("mem0") is None:  # find, not import: importing mem0 here would start its telemetry
    pytest.skip("the baselines extra is not installed: pip install 'agemem[baselines]'", allow_module_level=True)

FAST = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false", "eval.models=[scripted]"]


@pytest.fixture(scope="module")
def tokenizer():
    return load_tokenizer()


# --------------------------------------------------------------------------------------------- the endpoint


def test_tool_call_blocks_become_openai_tool_calls_and_other_text_stays():
    text = 'I will store it. <tool_call>{"name": "Memory", "arguments": {"content": "x"}}</tool_call> <tool_call>no'
    content, calls = parse_tool_calls(text)
    assert content == "I will store it.  <tool_call>no"  # the unparsable block stays text
    assert [c["function"]["name"] for c in calls] == ["Memory"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"content": "x"}
    rendered = chat_messages(
        [
            {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"function": {"name": "f", "arguments": '{"k": 1}'}}],
            },
        ]
    )
    assert rendered[0] == {"role": "user", "content": "ab"}
    assert rendered[1]["tool_calls"][0]["function"]["arguments"] == {"k": 1}  # templates take objects


def test_engine_server_answers_chat_completions_and_counts_every_token(tokenizer):
    replies = iter(["hello there", '<tool_call>{"name": "f", "arguments": {"a": 2}}</tool_call>'])
    engine = MessagesEngine(tokenizer, lambda conversation: next(replies))
    server = EngineServer(EngineChat(engine, tokenizer, SamplingParams()), "scripted", max_tokens_cap=64)
    try:
        url = server.base_url
        assert httpx.get(f"{url}/models").json()["data"][0]["id"] == "scripted"
        first = httpx.post(
            f"{url}/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        )
        body = first.json()
        assert body["choices"][0]["message"]["content"] == "hello there"
        tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
        second = httpx.post(
            f"{url}/chat/completions", json={"messages": [{"role": "user", "content": "go"}], "tools": tools}
        ).json()
        assert second["choices"][0]["finish_reason"] == "tool_calls"
        assert json.loads(second["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]) == {"a": 2}
        bad = httpx.post(f"{url}/chat/completions", json={"messages": []})
        assert bad.status_code == 400 and "non-empty" in bad.json()["error"]["message"]
        usage = [body["usage"], second["usage"]]
        totals = server.meter.totals()
        assert totals["calls"] == 2  # the refused request never reached the engine
        assert totals["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage) > 0
        expected = len(tokenizer("hello there", add_special_tokens=False)["input_ids"])
        assert body["usage"]["completion_tokens"] == expected
    finally:
        server.close()


def test_an_endpoint_that_does_not_answer_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"http://127\.0\.0\.1:9/v1 does not answer.*transformers serve"):
        check_reachable("http://127.0.0.1:9/v1", timeout_s=2)


# --------------------------------------------------------------------------------------------- the store adapter


def _env(store, scope: str, **env) -> MemoryEnv:
    config = EnvConfig(tools=[], rag_top_k=2, summarizer=SummarizerConfig(backend="extractive"), **env)
    resources = EnvResources.build(config, encoder=WordSetEncoder(), tokenizer=load_tokenizer())
    resources.ltm = store
    return MemoryEnv(resources, scope=scope)


def test_each_episode_books_exactly_what_the_system_spent_on_it_and_the_question_is_not_observed():
    meter = UsageMeter()
    store = SystemMemory(ListSystem(meter), meter)
    assert isinstance(store, ObservingMemory)
    a, b = _env(store, "a"), _env(store, "b")
    a.add_user("red apples grow here")
    b.add_user("blue sky")
    a.add_user("apples are sweet")
    b.add_user("what colour is the sky", question=True)  # searched with, not remembered
    # a: two observes of 20 and 16 characters -> 2 calls, 36 prompt tokens, 2 completion tokens
    assert a.stats.memory_system_cost["calls"] == 2 and a.stats.memory_system_cost["prompt_tokens"] == 36
    assert b.stats.memory_system_cost["calls"] == 1 and b.stats.memory_system_cost["prompt_tokens"] == 8
    assert [e.content for e in store.entries(scope="b")] == ["blue sky"]
    refused = store.add("x", scope="a")
    assert not refused.ok and "written by list" in refused.message


def test_rag_replace_keeps_only_the_latest_retrieval_in_context():
    meter = UsageMeter()
    store = SystemMemory(ListSystem(meter), meter)
    env = _env(store, "s", rag_replace=True)
    env.add_user("apples grow on trees")
    env.rag_retrieve()
    env.add_user("apples are red")
    env.rag_retrieve()
    shown = [m.content for m in env.context.messages if m.kind == "rag"]
    assert len(shown) == 1 and "apples are red" in shown[0]  # the newer block replaced the older
    piled = _env(SystemMemory(ListSystem(UsageMeter()), UsageMeter()), "s")
    piled.add_user("apples grow on trees")
    piled.rag_retrieve()
    piled.add_user("apples are red")
    piled.rag_retrieve()
    assert sum(m.kind == "rag" for m in piled.context.messages) == 2  # the -RAG ablation keeps every block


def test_a_snapshot_puts_every_scope_back_and_refuses_another_systems(tmp_path):
    meter = UsageMeter()
    store = SystemMemory(ListSystem(meter), meter)
    store.observe("one", scope="run")
    store.observe("two", scope="run")
    path = store.save(tmp_path / "after_000002.npz")
    fresh = SystemMemory(ListSystem(UsageMeter()), UsageMeter())
    fresh.restore(path)
    assert [e.content for e in fresh.entries(scope="run")] == ["one", "two"] and len(fresh) == 2
    other = ListSystem(UsageMeter())
    other.name = "other"
    with pytest.raises(ValueError, match="holds list's memory, not other's"):
        SystemMemory(other, UsageMeter()).restore(path)


@pytest.mark.parametrize("variant", MEMORY_SYSTEMS)
def test_a_memory_system_variant_offers_no_tools_and_shows_its_search(variant):
    config = apply_variant(load_config(AgeMemConfig, overrides=FAST), variant)
    assert config.env.tools == [] and config.env.rag_top_k == config.eval.rag_top_k and config.env.rag_replace
    assert config.rollout.stage1 and not config.rollout.stage1_agent and config.rollout.introspective_top_k == 0


def test_memory_system_settings_are_validated():
    with pytest.raises(ConfigError, match="base_url='localhost:8000' must start with http"):
        load_config(AgeMemConfig, overrides=["eval.memory_system.base_url=localhost:8000"])
    with pytest.raises(ConfigError, match="max_tokens=0"):
        load_config(AgeMemConfig, overrides=["eval.memory_system.max_tokens=0"])


# --------------------------------------------------------------------------------------------- the real libraries

LIBRARY_CALLS = {
    "mem0": ("mem0_extract", "mem0_update"),
    "mem0g": ("mem0_extract", "mem0_update", "mem0g_entities", "mem0g_relations", "mem0g_delete"),
    "amem": ("amem_analyse", "amem_evolve"),
    "langmem": ("langmem",),
}


@pytest.mark.parametrize("variant", MEMORY_SYSTEMS)
def test_each_library_stores_the_facts_the_agent_then_answers_from(variant, tmp_path, tokenizer):
    tasks = load_tasks(AgeMemConfig())[:3]
    facts = [f.text for t in tasks for f in t.supporting_facts if f.text]
    evidence = {t.question: next(f.text for f in t.supporting_facts if f.text) for t in tasks}
    model = MemorySystemsModel(facts, {t.question: t.answer for t in tasks}, evidence)
    config = load_config(
        AgeMemConfig, overrides=[*FAST, "data.limit=3", f"eval.variants=[{variant}]", "eval.rag_top_k=5"]
    )
    backends = {"scripted": Backend(MessagesEngine(tokenizer, model), tokenizer)}
    (results,) = evaluate_qa(config, tmp_path, backends=backends, encoder=WordSetEncoder(dim=8192))
    examples = [json.loads(line) for line in (tmp_path / "examples.jsonl").read_text().splitlines()]

    assert results["J"] == results["EM"] == 100.0  # every answer came from a memory the system returned
    assert results["MQ"] == 1.0
    for task, example in zip(tasks, examples):
        supporting = [f.text for f in task.supporting_facts if f.text]
        held = [m for m in example["memory"] if not m.startswith("relation: ")]
        if variant == "amem":  # A-Mem keeps each message itself as a note, with the context its LLM wrote
            assert all(note.endswith("\n(context: a scripted context; t1)") for note in held)
            assert all(any(fact in note for note in held) for fact in supporting)
        else:  # Mem0 and LangMem keep what their LLM extracted: exactly the supporting sentences
            assert sorted(held) == sorted(supporting)
        if variant == "mem0g":
            relations = [m for m in example["memory"] if m.startswith("relation: ")]
            assert relations and all("is_described_as -- fact" in r for r in relations)
        assert all(step["stage"] == 3 for step in example["transcript"])  # the agent never acted in Stage 1
        assert example["tool_calls"]["total"] == 0

    if variant == "amem":  # one analysis per note: every Stage-1 message became one
        assert sum(len(e["memory"]) for e in examples) == model.calls["amem_analyse"]
    # every library prompt the model answered is one memory call booked on some episode, and only those
    library = sum(model.calls.get(kind, 0) for kind in LIBRARY_CALLS[variant])
    assert library > 0 and sum(e["cost"]["memory_calls"] for e in examples) == library
    assert sum(e["cost"]["agent_calls"] for e in examples) == model.calls["agent"]
    assert results["cost"]["memory_calls"] == pytest.approx(library / 3)
    assert results["memory_system"]["name"] == variant and results["memory_system"]["endpoint"] == "EngineServer"
    assert results["memory_system"]["llm_failures"] == 0 if variant in ("mem0", "mem0g", "amem") else True
    assert (tmp_path / "memory_system" / variant).is_dir() or variant == "langmem"


def test_results_keep_the_pinned_library_versions(tmp_path, tokenizer):
    tasks = load_tasks(AgeMemConfig())[:1]
    model = MemorySystemsModel([], {tasks[0].question: "x"}, {tasks[0].question: "never shown"})
    config = load_config(AgeMemConfig, overrides=[*FAST, "data.limit=1", "eval.variants=[mem0g]"])
    backends = {"scripted": Backend(MessagesEngine(tokenizer, model), tokenizer)}
    (results,) = evaluate_qa(config, tmp_path, backends=backends, encoder=WordSetEncoder(dim=4096))
    settings = json.loads(Path(tmp_path / "results.json").read_text())["memory_system"]
    assert settings["library"] == "mem0ai==1.0.11" and settings["graph"] == "kuzu==0.11.3"
    assert settings == results["memory_system"]
    assert results["J"] == 0.0 and results["MQ"] == 0.0  # nothing worth remembering was extracted


class GraphQueryModel(MemorySystemsModel):
    """Also names the entities of a search query (no fact in it): each stored subject the query mentions."""

    def __call__(self, conversation):
        last_user = next(m["content"] for m in reversed(conversation) if m["role"] == "user")
        prompt = "\n".join(str(m.get("content") or "") for m in conversation)
        if MEM0G_ENTITIES in prompt and not self._found(last_user):
            self._count("mem0g_query_entities")
            named = [s for s in (f.split()[0].strip(".,").lower() for f in self.facts) if s in last_user.lower()]
            entities = [{"entity": subject, "entity_type": "topic"} for subject in named]
            return tool_call("extract_entities", {"entities": entities}) if entities else ""
        return super().__call__(conversation)


@pytest.mark.parametrize("relation_top_k", [0, 1])
def test_mem0g_shows_its_relations_beside_k_memories_when_the_scope_holds_more(relation_top_k, tmp_path, tokenizer):
    from agemem.eval.baselines import build_memory_system

    facts = [f"{name} is a city on the {side} coast." for name, side in [("Aldor", "north"), ("Brise", "south")]]
    facts += [f"Cova{n} is a village with {n} wells." for n in range(4)]
    model = GraphQueryModel(facts, {}, {})
    overrides = [*FAST, f"eval.memory_system.relation_top_k={relation_top_k}"]
    config = load_config(AgeMemConfig, overrides=overrides)
    built = build_memory_system(
        "mem0g", config, Backend(MessagesEngine(tokenizer, model), tokenizer), WordSetEncoder(dim=4096), tmp_path
    )
    try:
        for fact in facts:
            built.store.observe(f"By the way: {fact}", scope="run")
        held = [e for e in built.store.entries(scope="run") if e.metadata["kind"] == "memory"]
        assert len(held) == 6  # more memories than the k = 2 a search shows
        env = _env(built.store, "run")  # rag_top_k = 2
        env.add_user("Which coast are Aldor and Brise on?")
        assert env.rag_retrieve() is not None
        shown = json.loads(env.context.messages[-1].content)
    finally:
        built.close()
    assert len(shown["memories"]) == 2 and all(not m["content"].startswith("relation: ") for m in shown["memories"])
    relations = [r["content"] for r in shown["relations"]]
    # its own k: as many as memories (Mem0g's one limit), or the one set; ranked by the library (BM25)
    assert len(relations) == (relation_top_k or 2)
    assert set(relations) <= {
        "relation: aldor -- is_described_as -- fact",
        "relation: brise -- is_described_as -- fact",
    }
    assert model.calls["mem0g_query_entities"] >= 1
    assert built.store.system.settings()["relation_top_k"] == (relation_top_k or "as many as memories")


class FailingSystem(ListSystem):
    """Its library raises on every call, as one whose endpoint is down would."""

    def observe(self, text, scope):
        raise RuntimeError("the endpoint is down")

    def search(self, query, top_k, scope):
        raise RuntimeError("the endpoint is down")


def test_a_library_that_raises_costs_the_message_not_the_run(tokenizer):
    meter = UsageMeter()
    store = SystemMemory(FailingSystem(meter), meter)
    env = _env(store, "s")
    env.add_user("apples grow on trees")  # no exception: the message goes unremembered
    assert env.rag_retrieve() is None  # the search shows nothing
    assert store.failures == {"observe": 1, "search": 1}
    assert store.last_failure == "search: RuntimeError: the endpoint is down"

    def broken(conversation):
        raise RuntimeError("CUDA out of memory")

    server = EngineServer(
        EngineChat(MessagesEngine(tokenizer, broken), tokenizer, SamplingParams()), "m", max_tokens_cap=8
    )
    try:
        reply = httpx.post(f"{server.base_url}/chat/completions", json={"messages": [{"role": "user", "content": "x"}]})
        assert reply.status_code == 502 and "CUDA out of memory" in reply.json()["error"]["message"]
        assert server.meter.failures == 1 and server.meter.calls == 1
    finally:
        server.close()


@pytest.mark.parametrize("variant", MEMORY_SYSTEMS)
def test_a_snapshot_of_each_library_restores_its_memory_without_the_llm(variant, tmp_path, tokenizer):
    from agemem.eval.baselines import build_memory_system

    tasks = load_tasks(AgeMemConfig())[:1]
    facts = [f.text for f in tasks[0].supporting_facts if f.text]
    model = MemorySystemsModel(facts, {}, {})
    config = load_config(AgeMemConfig, overrides=[*FAST, "env.encoder.model=bundled:all-MiniLM-L6-v2"])
    backend = Backend(MessagesEngine(tokenizer, model), tokenizer)
    encoder = WordSetEncoder(dim=4096)
    first = build_memory_system(variant, config, backend, encoder, tmp_path / "first")
    try:
        for fact in facts:
            first.store.observe(f"By the way: {fact}", scope="run")
        held = [e.content for e in first.store.entries(scope="run") if not e.content.startswith("relation: ")]
        assert len(held) == len(facts)  # one memory per message, whichever library
        path = first.store.save(tmp_path / "after_000001.npz")
    finally:
        first.close()
    second = build_memory_system(variant, config, backend, encoder, tmp_path / "second")
    try:
        second.store.restore(path)
        restored = [e.content for e in second.store.entries(scope="run")]
        assert restored == held  # A-Mem's context and tags included
        assert second.endpoint.meter.calls == 0  # nothing asked the LLM again
    finally:
        second.close()
