"""`agemem chat` driven through a pseudo-terminal, as a person would use it: a fact told in one session is
stored (the tool call is shown), the program exits, and a new session retrieves it from the memory file.
The policy is the scripted memory policy behind an OpenAI-compatible completions endpoint (the way
`vllm serve <export>` is used); a second test runs the exported tiny model locally."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from agemem.entrypoints.export import ExportSettings, export_policy
from agemem.recipes.learn.expert import parse_chatml
from agemem.rollouts.config import PolicyConfig
from agemem.rollouts.policy import load_policy
from tests.agemem.memory_policy import scripted_reply
from tests.fake_endpoint import FakeChatEndpoint

pexpect = pytest.importorskip("pexpect")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """An export of the tiny model (its weights do not matter when the endpoint plays the policy)."""
    root = tmp_path_factory.mktemp("chat")
    model, tokenizer = load_policy(PolicyConfig(device="cpu"))
    model.save_pretrained(root / "tiny")
    tokenizer.save_pretrained(root / "tiny")
    export_policy(
        root / "tiny",
        root / "export",
        ExportSettings(check=False),
        overrides=["sampling.max_tokens=8", "rollout.introspective_top_k=0"],
    )
    return root / "export", tokenizer


def _completions_server(tokenizer) -> FakeChatEndpoint:
    """``/v1/completions`` over token ids, as vLLM serves them: decode the prompt, let the script reply."""

    def reply(body, number):
        messages = parse_chatml(tokenizer.decode(body["prompt"]))
        text = scripted_reply(messages)
        ids = [*tokenizer.encode(text, add_special_tokens=False), tokenizer.convert_tokens_to_ids("<|im_end|>")]
        choice = {"text": text, "token_ids": ids, "finish_reason": "stop"}
        return 200, json.dumps({"choices": [choice]}).encode()

    return FakeChatEndpoint(reply)


def _spawn(*args: str):
    env = {**os.environ, "NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200", "HF_HUB_OFFLINE": "1"}
    return pexpect.spawn(
        sys.executable, ["-m", "agemem", "chat", *args], cwd=str(REPO), env=env, encoding="utf-8", timeout=180
    )


def test_a_fact_told_in_one_session_is_retrieved_in_the_next(exported, tmp_path):
    directory, tokenizer = exported
    server = _completions_server(tokenizer)
    memory = tmp_path / "memory.sqlite"
    common = ["--model", str(directory), "--memory", str(memory), "--endpoint", server.url]
    try:
        first = _spawn(*common)
        first.expect("0 memories on file")
        first.expect("you> ")
        first.sendline("Remember: my locker number is 317.")
        first.expect("Add_memory")
        first.expect("ok: stored 1 memory entry")
        first.expect("agent> I will remember that.")
        first.expect("you> ")
        first.sendline("/exit")
        first.expect(pexpect.EOF)
        first.close()
        assert first.exitstatus == 0

        second = _spawn(*common)
        second.expect("1 memory on file")
        second.expect("you> ")
        second.sendline("What is my locker number?")
        second.expect("Retrieve_memory")
        second.expect("my locker number is 317")  # the retrieved memory, shown under the call
        second.expect("agent> my locker number is 317.")
        second.expect("you> ")
        second.sendline("/memories")
        second.expect(r"mem_[0-9a-f]{8}  my locker number is 317\.")
        second.expect("you> ")
        second.sendeof()  # Ctrl-D ends the session like /exit
        second.expect(pexpect.EOF)
        second.close()
        assert second.exitstatus == 0
    finally:
        server.close()
    prompts = [body["prompt"] for _, _, body in server.requests]
    assert all(isinstance(p, list) for p in prompts)  # token ids rendered with the export's chat template
    assert server.requests[0][2]["model"] == str(directory)  # vllm serve <dir> names the model by its path


def test_the_local_exported_model_chats_and_a_busy_memory_file_is_refused(exported, tmp_path):
    directory, _ = exported
    memory = tmp_path / "memory.sqlite"
    local = _spawn("--model", str(directory), "--memory", str(memory), "--device", "cpu", "--max-steps", "1")
    local.expect("you> ")
    local.sendline("hello there")
    local.expect("agent> ")  # the random tiny model's reply (or the no-answer note), not a crash
    local.expect("you> ")
    busy = _spawn("--model", str(directory), "--memory", str(memory), "--device", "cpu")
    busy.expect("in use by another agent")
    busy.expect(pexpect.EOF)
    busy.close()
    assert busy.exitstatus == 2
    local.sendline("/exit")
    local.expect(pexpect.EOF)
    local.close()
    assert local.exitstatus == 0


def test_the_terminal_shows_recalled_memories_tool_calls_and_format_problems():
    from rich.console import Console

    from agemem.entrypoints.agent import AgentStep, ToolEvent
    from agemem.entrypoints.terminal import print_step

    console = Console(record=True, width=200, color_system=None)
    recalled = {"message": "1 memory shown before the reply", "memories": [{"content": "locker 317"}]}
    print_step(
        console, AgentStep("", None, [ToolEvent("Retrieve_memory", {"query": "q"}, True, recalled)], automatic=True)
    )
    failed = ToolEvent("Delete_memory", {"memory_id": "mem_x"}, False, {"ok": False, "message": "no memory with id"})
    print_step(console, AgentStep("...", "t", [failed], violations=["invalid JSON in <tool_call>"]))
    text = console.export_text()
    assert "↺ recalled for the policy: 1 memory shown before the reply" in text and "· locker 317" in text
    assert '⚙ Delete_memory {"memory_id": "mem_x"}' in text and "→ error: no memory with id" in text
    assert "! format: invalid JSON in <tool_call>" in text
