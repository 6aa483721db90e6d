"""One agent loop: a stream's tasks are episodes on the environment's turn loop (``MemoryEnv`` in an ``Episode`` or a
``GameEpisode``), driven one reply at a time by ``ChatDriver``; the stream's bank comes in as the env's tool runner
and ReMem's status as its reply note."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from agemem.core.config import EnvConfig
from agemem.core.env import MemoryEnv
from agemem.core.protocol import parse_response
from agemem.eval.stream.agent import BankTools, ChatReply, StreamPlay
from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.remem import REFINE_TOOLS, ReMemBudget, ReMemSession
from agemem.rollouts.chat_driver import ChatDriver
from agemem.rollouts.engines.base import derive_seed
from agemem.rollouts.episode import Episode, Stages
from agemem.rollouts.records import Task
from tests.conftest import WordSetEncoder
from tests.eval.stream.transcripts import cases, digest

RECORDED = Path(__file__).resolve().parents[2] / "data" / "stream_transcripts.json"


def test_the_streams_reproduce_the_episodes_recorded_before_they_moved_onto_the_env_loop():
    # 120 seeded episodes (QA and a game x no tools, the policy addition, ReMem), replies of every kind the protocol
    # knows and engine errors: every request the model got and every result are those of the old dialogue loop
    # (ReMem's 40: of ReMem as it plays since it follows Evo-Memory; see transcripts.py)
    recorded = json.loads(RECORDED.read_text())
    now = [digest(case) for case in cases(old_api=False)]
    assert len(now) == len(recorded) == 120
    assert [c["case"] for c in now if c not in recorded] == []
    covered = {(c["case"].rsplit("/", 1)[0], c["won"], c["error"] is not None, c["answer"] is not None) for c in now}
    assert ("game/policy", True, False, False) in covered and ("qa/remem", None, True, False) in covered


class Script:
    def __init__(self, *replies: str | None):
        self.replies = list(replies)
        self.seen: list[tuple[list[dict], list[str], int | None]] = []

    def __call__(self, messages, tools, seed) -> ChatReply:
        self.seen.append(([dict(m) for m in messages], [t["function"]["name"] for t in tools or []], seed))
        text = self.replies.pop(0)
        return ChatReply("", 5, error="server down") if text is None else ChatReply(text, prompt_tokens=11)


def _listed(system: str) -> list[str]:
    """The tools a system message lists (``agemem`` tool format: their schemas are in it)."""
    return re.findall(r'"name": "(\w+_\w+)"', system)


def _episode(tools, model, question: str = "Question: where?", debrief=None, replies: int = 3, note=None):
    play = StreamPlay()
    setup = play.setup(model, replies)
    env = play.env(tools, setup, "", note=note)
    stages = Stages([], [], question, debrief=debrief, debrief_replies=2)
    return env, Episode(Task("t", "where?", "Oslo", [], []), [], env, setup, 0, stages=stages)


def test_the_driver_seeds_each_call_counts_tokens_and_turns_an_engine_error_into_the_episodes_end():
    model = Script("<think>hm</think>", "<answer>Oslo</answer>")
    _, episode = _episode(BankTools(MemoryBank(WordSetEncoder()), offered=()), model)
    driver = ChatDriver(model, seed=7)
    trajectory = driver.play(episode.play())
    assert trajectory.answer == "Oslo" and trajectory.ended_by == "answer"
    assert [seed for _, _, seed in model.seen] == [derive_seed(7, 0), derive_seed(7, 1)]
    assert driver.calls == 2 and driver.prompt_tokens == 22  # 11 + 11, as the model counted them
    assert json.loads(model.seen[1][0][-1]["content"])["tool"] == "format_check"  # the env's feedback, no answer

    model = Script("<think>hm</think>", None)
    _, episode = _episode(BankTools(MemoryBank(WordSetEncoder()), offered=()), model)
    driver = ChatDriver(model, seed=None)
    trajectory = driver.play(episode.play())
    assert trajectory.ended_by == "engine_error" and trajectory.error == "server down"
    assert driver.calls == 2 and driver.prompt_tokens == 16 and [s for _, _, s in model.seen] == [None, None]


def test_the_bank_runs_the_calls_the_env_only_parses_books_and_shows_them():
    bank = MemoryBank(WordSetEncoder())
    bank.add(Record("mem_00000001", "old", "Answer: Paris", "t0", -1, "initial"))
    written = []

    def write(content, metadata):
        written.append(
            bank.add(Record(f"mem_p{len(written):07d}", "where?", content, "t", 0, "policy", metadata=metadata))
        )
        return written[-1]

    tools = BankTools(bank, write)
    delete = '{"name": "Delete_memory", "arguments": {"memory_id": "mem_00000001", "confirmation": true}}'
    add = '{"name": "Add_memory", "arguments": {"content": "Oslo, née Christiania", "memory_type": "fact"}}'
    model = Script(f"<think>t</think><tool_call>[{delete}, {add}]</tool_call>", "<answer>Oslo</answer>")
    env, episode = _episode(tools, model)
    ChatDriver(model, None).play(episode.play())
    assert [r.id for r in bank] == ["mem_p0000000"] and written[0].metadata == {"memory_type": "fact"}
    assert env.ltm.entries(scope=env.scope) == []  # the env's own LTM is not this agent's memory
    assert env.stats.tool_counts == {"Delete_memory": 1, "Add_memory": 1}
    assert sorted(_listed(model.seen[0][0][0]["content"])) == ["Add_memory", "Delete_memory"]  # the runner's tools
    shown = [json.loads(m["content"]) for m in model.seen[1][0] if m["role"] == "tool"]
    assert [(r["tool"], r["ok"]) for r in shown] == [("Delete_memory", True), ("Add_memory", True)]
    # stored text is shown as written (as in training), not as \u escapes
    assert "née" in model.seen[1][0][-1]["content"]


def test_remem_offers_its_refine_tools_and_its_status_replaces_the_format_feedback():
    session = ReMemSession(MemoryBank(WordSetEncoder()), ReMemBudget(max_think=1, max_refine=1, max_steps=3))
    model = Script("<think>first</think>", "<think>second</think>", "<answer>Oslo</answer>")
    env, episode = _episode(session, model, note=session.note)
    ChatDriver(model, None).play(episode.play())
    without_add = tuple(name for name in REFINE_TOOLS if name != "Add_memory")  # no write function: no Add
    assert env.offered == without_add and sorted(_listed(model.seen[0][0][0]["content"])) == sorted(without_add)
    thought, refused = (json.loads(model.seen[i][0][-1]["content"]) for i in (1, 2))
    assert thought == {"tool": "remem", "ok": True, "message": thought["message"]}
    assert thought["message"].startswith("Thought noted. Step 1 of 3 for this task (2 left).")
    assert "no Think operation left in this step (1 per step)" in refused["message"]
    assert "Step 2 of 3" in refused["message"]
    assert session.operations == ["think", "malformed", "act"] and session.thoughts == ["first"]


@pytest.mark.parametrize("note_text", [None, "custom"])
def test_a_reply_note_replaces_the_format_feedback_even_when_it_says_nothing(make_env, note_text):
    env: MemoryEnv = make_env(EnvConfig())
    env.note = lambda parsed: note_text
    env.add_user("hello")
    env.step("no tags at all")
    last = env.context.messages[-1]
    if note_text is None:
        assert last.role == "assistant"  # no format feedback: the note decided
    else:
        assert (last.kind, last.content) == ("note", "custom")
    assert parse_response("no tags at all", env.offered).violation_kinds()  # the reply did break the format


def test_the_memory_turn_is_the_episodes_debrief_written_from_the_task_turn():
    model = Script("<think>maybe</think><answer>Oslo</answer>", "<think>x</think>", "<answer>OK</answer>")
    seen_steps = []

    def debrief(steps):
        seen_steps.append([s.answer for s in steps])
        return "The task is over."

    _, episode = _episode(BankTools(MemoryBank(WordSetEncoder())), model, debrief=debrief)
    trajectory = ChatDriver(model, None).play(episode.play())
    assert seen_steps == [["Oslo"]] and trajectory.answer == "Oslo"
    assert [(s.turn, s.answer) for s in trajectory.steps] == [(0, "Oslo"), (1, None), (1, "OK")]
    assert model.seen[1][0][-1] == {"role": "user", "content": "The task is over."}


def test_an_engine_model_gets_the_episodes_own_prompt_ids_rendered_once(qwen_tokenizer, monkeypatch):
    from agemem.core import chat as chat_module
    from agemem.core.chat import encode_chat
    from agemem.rollouts.engines.base import SamplingParams
    from agemem.rollouts.engines.chat import EngineChat
    from tests.eval.agents import MessagesEngine

    prompts = []

    class Recording(MessagesEngine):
        def generate(self, prompt_ids, sampling, *, messages=None):
            prompts.append((list(prompt_ids[0]), messages[0]))
            return super().generate(prompt_ids, sampling, messages=messages)

    replies = iter(["<think>hm</think>", "<answer>Oslo</answer>"])
    model = EngineChat(Recording(qwen_tokenizer, lambda conversation: next(replies)), qwen_tokenizer, SamplingParams())
    rendered = []
    real = chat_module.render_chat
    monkeypatch.setattr(chat_module, "render_chat", lambda *a, **k: rendered.append(1) or real(*a, **k))
    tools = BankTools(MemoryBank(WordSetEncoder()), offered=())
    play = StreamPlay(tokenizer=None)
    setup = play.setup(model, 3)
    assert setup.tokenizer is qwen_tokenizer  # the model's own, not env.context.tokenizer
    env = play.env(tools, setup, "")
    episode = Episode(Task("t", "where?", "Oslo", [], []), [], env, setup, 0, stages=Stages([], [], "Question: where?"))
    trajectory = ChatDriver(model, 3, setup.tokenizer).play(episode.play())
    # per reply: the episode's prompt and the env's context measure after the step; the engine renders nothing
    assert trajectory.answer == "Oslo" and len(prompts) == 2 and len(rendered) == 2 * 2
    for ids, messages in prompts:  # exactly what EngineChat would have rendered itself
        assert ids == encode_chat(qwen_tokenizer, messages, env.tools)
