"""Every memory-system baseline end to end behind a real local server: ``transformers serve`` running a tiny
random Qwen2 model (saved to a folder, nothing downloaded), the agent and the memory system both calling it as
``--model openai:<folder>@<url>``, on HotpotQA questions and ALFWorld games through the CLI.

The tiny model's replies are blank lines, which no library can parse: Mem0, Mem0g and LangMem build an empty
memory after one extraction call per message, and A-Mem keeps every message as a note (its content is the
message; only its LLM-written metadata is lost). Those are the memories asserted here, with the call counts.
Run with ``pytest -m baselines`` (``.ci/run`` does).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from agemem.core.configlib import load_config
from agemem.entrypoints.cli import main
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.baselines import MEMORY_SYSTEMS
from agemem.rollouts.messages import stage1_messages
from agemem.tasks import load_tasks
from tests.alfworld_data import DATA as ALFWORLD_DATA
from tests.alfworld_data import needs_alfworld

pytestmark = [
    pytest.mark.baselines,
    pytest.mark.skipif(importlib.util.find_spec("mem0") is None, reason="pip install 'agemem[baselines]'"),
    pytest.mark.skipif(shutil.which("transformers") is None, reason="the transformers CLI is not installed"),
]

QUESTIONS = 3


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(model folder, base URL)`` of a ``transformers serve`` process over the tiny random model."""
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import TINY_POLICY, load_policy

    folder = tmp_path_factory.mktemp("tiny-qwen2")
    model, tokenizer = load_policy(PolicyConfig(model=TINY_POLICY))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    port = _free_port()
    log = (folder / "serve.log").open("w")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    command = ["transformers", "serve", str(folder), "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve did not start: {(folder / 'serve.log').read_text()[-2000:]}")
            time.sleep(1)
        yield folder, url
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


def _common(folder: Path) -> list[str]:
    return [
        "engine.openai.api=chat",  # transformers serve speaks chat; the agent's prompts go as messages
        f"policy.tokenizer={folder}",
        "sampling.max_tokens=16",
        "eval.memory_system.max_tokens=16",
        "env.summarizer.backend=extractive",
        "logging.progress=false",
        "eval.plot=false",
    ]


def _examples(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("variant", MEMORY_SYSTEMS)
def test_hotpotqa_behind_transformers_serve(variant, served, tmp_path, capsys):
    folder, url = served
    out = tmp_path / variant
    args = ["eval", "hotpotqa", "--model", f"openai:{folder}@{url}", "--variant", variant, "--limit", str(QUESTIONS)]
    assert main([*args, "--out", str(out), *_common(folder)]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["memory_system"]["endpoint"] == "ForwardingServer" and results["memory_system"]["upstream"] == url
    tasks = load_tasks(load_config(AgeMemConfig, overrides=[f"data.limit={QUESTIONS}"]))
    for task, example in zip(tasks, _examples(out), strict=True):
        turns = stage1_messages(task, "turns", 2)
        cost = example["cost"]
        assert cost["memory_prompt_tokens"] > 0 and cost["agent_calls"] >= 1
        if variant == "amem":
            # every message a note (content verbatim); analysis per note, evolution from the second on
            assert [note.split("\n(context: ")[0] for note in example["memory"]] == turns
            assert cost["memory_calls"] == 2 * len(turns) - 1
        else:
            assert example["memory"] == []  # nothing parsable came back, nothing was stored
            if variant == "mem0g":  # fact extraction, graph entities and relations per message
                assert cost["memory_calls"] >= 2 * len(turns)
            else:  # one extraction call per message; no facts, so no update call
                assert cost["memory_calls"] == len(turns)
    assert results["played"] == QUESTIONS and results["cost"]["llm_calls"] > results["cost"]["memory_calls"]


@needs_alfworld
@pytest.mark.parametrize("variant", MEMORY_SYSTEMS)
def test_alfworld_behind_transformers_serve(variant, served, tmp_path):
    folder, url = served
    out = tmp_path / variant
    args = ["eval", "alfworld", "--model", f"openai:{folder}@{url}", "--variant", variant, "--limit", "2"]
    extra = ["--data-dir", str(ALFWORLD_DATA), "alfworld.max_env_steps=3", "alfworld.max_replies_per_step=1"]
    assert main([*args, *extra, "--out", str(out), *_common(folder)]) == 0
    examples = _examples(out)
    memory = [m["content"] for m in json.loads((out / "memory.json").read_text())]
    outcomes = [f'The task "{e["task"]}" was not completed within 3 steps.' for e in examples if not e["won"]]
    if variant == "amem":  # the games' outcomes (and any admissible command's result) were kept for later games
        assert all(any(note.startswith(outcome) for note in memory) for outcome in outcomes)
    else:
        assert memory == []
    assert all(e["cost"]["memory_calls"] >= 1 for e in examples)  # each game's outcome at least was observed
    assert (out / "memory").is_dir()  # the chunk's snapshot a resumed run starts from
