"""A memory system of one's own is one registration: ``--variant <name>`` accepts it, the harness builds it over the
model's endpoint and shows its search results, compare tables print its title; the built-in variants keep their
order (a variant's position seeds its sampling)."""

from __future__ import annotations

import json

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.baselines.endpoint import UsageMeter
from agemem.eval.compare import method_name
from agemem.eval.memory_systems import (
    MemorySystemSpec,
    eval_variants,
    memory_system,
    register_memory_system,
    seed_position,
    unregister_memory_system,
)
from agemem.eval.models import Backend
from agemem.eval.qa import evaluate_qa
from agemem.tasks import load_tasks
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer
from tests.eval.toy_memory import ListSystem

FAST = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false", "eval.models=[scripted]"]


class Notebook(ListSystem):
    """The test suite's toy system (every message kept verbatim), registered as a baseline of one's own."""

    name = "notebook"

    def __init__(self, folder) -> None:
        super().__init__(UsageMeter())
        self.folder = folder

    def settings(self):
        return {"folder": self.folder.name}


@pytest.fixture
def notebook():
    built = []

    def build(llm, config, encoder, folder):
        built.append((llm.base_url, folder.name))
        return Notebook(folder)

    spec = register_memory_system(MemorySystemSpec("notebook", "Notebook", build))
    try:
        yield spec, built
    finally:
        unregister_memory_system("notebook")


def test_the_builtin_variants_keep_their_order_and_a_registered_one_comes_last(notebook):
    builtins = ("agemem", "no_memory", "rag", "ltm_only", "full_context", "mem0", "mem0g", "amem", "langmem")
    assert eval_variants() == (*builtins, "notebook")
    # sampling seeds follow the order variants joined: full_context (added later) and a plugin's come after
    seeded = ("agemem", "no_memory", "rag", "ltm_only", "mem0", "mem0g", "amem", "langmem", "full_context", "notebook")
    assert [seed_position(v) for v in seeded] == list(range(10))
    assert memory_system("mem0g").title == "Mem0g" and method_name("mem0g") == "Mem0g"
    assert method_name("notebook") == "Notebook" and method_name("agemem") == "AgeMem"
    with pytest.raises(ValueError, match="registered already"):
        register_memory_system(MemorySystemSpec("notebook", "Other", lambda *a: None))
    with pytest.raises(ValueError, match="tool variant"):
        register_memory_system(MemorySystemSpec("rag", "RAG", lambda *a: None))


def test_a_registered_system_is_played_as_a_variant_and_its_search_shown(notebook, tmp_path):
    from agemem.entrypoints.cli import build_parser

    _, built = notebook
    assert build_parser().parse_args(["eval", "hotpotqa", "--variant", "notebook"]).variant == ["notebook"]
    tasks = load_tasks(AgeMemConfig())[:2]
    seen: list[str] = []

    def agent(conversation):
        seen.append("\n".join(m["content"] for m in conversation if m["role"] != "system"))
        return answer("x")

    tokenizer = load_tokenizer()
    config = load_config(AgeMemConfig, overrides=[*FAST, "data.limit=2", "eval.variants=[notebook]"])
    backends = {"scripted": Backend(MessagesEngine(tokenizer, agent), tokenizer)}
    (results,) = evaluate_qa(config, tmp_path, backends=backends, encoder=WordSetEncoder())
    assert results["memory_system"]["name"] == "notebook" and results["memory_system"]["folder"] == "notebook"
    assert built and built[0][1] == "notebook" and built[0][0].startswith("http://127.0.0.1")
    examples = [json.loads(line) for line in (tmp_path / "examples.jsonl").read_text().splitlines()]
    for task, example in zip(tasks, examples):
        assert example["tool_calls"]["total"] == 0  # a memory-system variant offers the agent no tools
        assert any(p.text in "\n".join(example["memory"]) for p in task.contexts)  # it observed Stage 1
    paragraphs = [p.text for task in tasks for p in task.contexts]
    assert seen and all(any(text in prompt for text in paragraphs) for prompt in seen)  # its search, shown


def test_an_unknown_variant_names_every_choice_and_how_to_add_one():
    with pytest.raises(ConfigError, match=r"choose one of 'agemem', 'no_memory', 'rag', 'ltm_only'.*register_memory"):
        load_config(AgeMemConfig, overrides=["eval.variants=[rag_only]"])
