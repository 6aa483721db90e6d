"""Generated stream episodes for the one-agent-loop check: what the model is shown and what each task returns.

:func:`cases` records, for every generated case (QA and a scripted game; the standard agent without tools, the
policy addition, ReMem), every request the model got (messages, the offered tools, the seed) and the task's
:class:`~agemem.eval.stream.base.Attempt`, ReMem's counts and the bank afterwards;
``python -m tests.eval.stream.transcripts OUT.json`` writes each case's :func:`digest`.
The cases are seeded scripts of replies drawn from every kind the protocol knows (answers, thoughts alone, valid,
invalid and unknown tool calls, text outside the tags, engine errors), so running it on two versions of the code and
comparing the files shows whether the agent loop changed anything a model or a result sees.
``tests/data/stream_transcripts.json`` holds the output of the code before the streams moved onto the environment's
turn loop (commit 0e46255; the move, dae194d, reproduced every case), except ReMem's cases, recorded again when ReMem
took Evo-Memory's per-step budgets, feedback in its records and Add / Merge in Refine (its prompt and play changed
on purpose); ``tests/eval/stream/test_one_agent_loop.py`` checks that today's code reproduces it.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import sys
from dataclasses import asdict
from typing import Any

from agemem.eval.stream.agent import BankTools, ChatReply
from agemem.eval.stream.bank import MemoryBank, Record
from agemem.eval.stream.base import Demonstration
from agemem.eval.stream.remem import ReMemBudget, ReMemSession
from agemem.tasks.alfworld import AlfworldConfig, Game, GameState
from agemem.tasks.stream import StreamItem
from tests.conftest import WordSetEncoder

CASES = 20
"""cases per (stream kind, agent)."""
GAME_ACTS = ("go to room 3", "take key", "take key", "dance")
"""the commands a game's Act draws from (the winning two most often)."""


def _call(*calls: tuple[str, dict[str, Any]]) -> str:
    return "<tool_call>" + json.dumps([{"name": n, "arguments": a} for n, a in calls]) + "</tool_call>"


def reply_kinds(rng: random.Random, known_ids: list[str], act: str) -> str:
    """One reply, drawn from every kind of reply the protocol knows."""
    memory_id = rng.choice(known_ids) if known_ids else "mem_00000000"
    kind = rng.randrange(11)
    if kind == 0:
        return "I am not sure what to do here."
    if kind == 1:
        return f"<think>thinking about {rng.randrange(100)}</think>"
    if kind == 2:
        return "<think>store it</think>" + _call(("Add_memory", {"content": f"lesson {rng.randrange(100)}"}))
    if kind == 3:
        return "<think>drop it</think>" + _call(("Delete_memory", {"memory_id": memory_id, "confirmation": True}))
    if kind == 4:
        return _call(("Retrieve_memory", {"query": "capital", "top_k": rng.choice([1, 5])}))
    if kind == 5:
        return _call(("Update_memory", {"memory_id": memory_id, "content": "a better lesson"}))
    if kind == 6:
        return _call(("Add_memory", {"content": 3}))  # bad arguments
    if kind == 7:
        return _call(("Frobnicate_memory", {}))  # unknown tool
    if kind == 8:
        return f"<think>sure</think><answer>{act}</answer>"
    if kind == 9:
        return "text before <answer>" + act + "</answer>"
    return f"<think>both</think>{_call(('Add_memory', {'content': 'x'}))}<answer>{act}</answer>"


class ScriptedModel:
    """Replies drawn with ``rng``; records every request; fails (engine error) with probability ``failure``."""

    def __init__(self, rng: random.Random, acts: list[str], known_ids: list[str], failure: float = 0.03):
        self.rng, self.acts, self.known_ids, self.failure = rng, acts, known_ids, failure
        self.seen: list[dict[str, Any]] = []

    def __call__(self, messages, tools, seed) -> ChatReply:
        names = [t["function"]["name"] for t in tools or []]
        self.seen.append({"messages": [dict(m) for m in messages], "tools": names, "seed": seed})
        if self.rng.random() < self.failure:
            return ChatReply("", prompt_tokens=7, error="server down")
        text = reply_kinds(self.rng, self.known_ids, self.rng.choice(self.acts))
        return ChatReply(text, prompt_tokens=sum(len(m["content"]) for m in messages) // 4)


class WalkGame:
    """A corridor: ``go to room N`` moves, ``take key`` in room 3 wins."""

    def __init__(self, game: Game):
        self.room = 1

    def reset(self) -> GameState:
        return GameState("You are in room 1. Your task is to: take the key.", self._admissible(), False)

    def step(self, command: str) -> GameState:
        if command == "take key" and self.room == 3:
            return GameState("You take the key. You won!", [], True)
        if command.startswith("go to room "):
            self.room = int(command.rsplit(" ", 1)[1])
        return GameState(f"You are in room {self.room}.", self._admissible(), False)

    def _admissible(self) -> list[str]:
        return [f"go to room {n}" for n in (1, 2, 3) if n != self.room] + (["take key"] if self.room == 3 else [])

    def close(self) -> None:
        pass


def _bank(rng: random.Random) -> tuple[MemoryBank, list[Demonstration]]:
    bank = MemoryBank(WordSetEncoder())
    demos = []
    for n in range(rng.randint(0, 3)):
        record = bank.add(Record(f"mem_{n:08d}", f"question {n}", f"Answer: a{n}", f"t{n}", -1, "initial"))
        demos.append(Demonstration(record.id, record.query, record.execution, 0.5))
    return bank, demos


def _tools(agent: str, bank: MemoryBank, old_api: bool):
    if agent == "remem":
        return ReMemSession(bank, ReMemBudget(max_think=2, max_refine=2, refine_top_k=2, max_steps=4))
    if agent == "policy":
        written = itertools.count()

        def write(content: str, metadata: dict[str, Any]) -> Record:
            record_id = f"mem_p{next(written):07d}"
            return bank.add(Record(record_id, "the task", content, "t", 0, "policy", metadata=metadata))

        return BankTools(bank, write)
    return None if old_api else BankTools(bank, offered=())


def _qa_task(old_api: bool):
    from agemem.eval.stream.tasks import build_task
    from tests.eval.stream.helpers import stream_config

    config = stream_config("stream.task=synthetic", "stream.synthetic_tasks=4", "stream.max_steps=3")
    return build_task(config)


def _game_task(old_api: bool):
    settings = AlfworldConfig(max_env_steps=5, max_replies_per_step=2)
    if old_api:
        from agemem.eval.stream.alfworld_task import AlfworldStreamTask

        return AlfworldStreamTask([], settings, open_game=WalkGame)
    from agemem.eval.stream.tasks import GameStreamTask
    from agemem.tasks.alfworld import SUITE

    return GameStreamTask([], SUITE, settings, open_game=WalkGame)


def cases(old_api: bool) -> list[dict[str, Any]]:
    """Every generated case's requests and outcome."""
    out = []
    qa, game = _qa_task(old_api), _game_task(old_api)
    game_item = StreamItem(id="walk", query="take the key", prompt="take the key", payload=Game("walk", None, "pick"))
    for kind, task in (("qa", qa), ("game", game)):
        for agent in ("standard", "policy", "remem"):
            for case in range(CASES):
                rng = random.Random(f"{kind}/{agent}/{case}")
                bank, demos = _bank(rng)
                item = rng.choice(task.items()) if kind == "qa" else game_item
                acts = (
                    [item.answer or "x", "wrong"] if kind == "qa" else ["go to room 3", "take key", "take key", "dance"]
                )
                model = ScriptedModel(rng, acts, [d.record_id for d in demos])
                tools = _tools(agent, bank, old_api)
                attempt = task.play(item, demos, model, tools, seed=case if case % 3 else None)
                out.append(
                    {
                        "case": f"{kind}/{agent}/{case}",
                        "seen": model.seen,
                        "attempt": asdict(attempt),
                        "remem": tools.to_json() if isinstance(tools, ReMemSession) else None,
                        "bank": [[r.id, r.execution, r.metadata] for r in bank],
                    }
                )
    return out


def digest(case: dict[str, Any]) -> dict[str, Any]:
    """A case as the committed file keeps it: a few readable fields and the sha256 of everything."""
    attempt = case["attempt"]
    if attempt["error"]:  # the one intended difference: a game's debrief error is labelled, as `agemem eval` does
        attempt["error"] = attempt["error"].removeprefix("debrief: ")
    text = json.dumps(case, sort_keys=True, ensure_ascii=False)
    return {
        "case": case["case"],
        "requests": len(case["seen"]),
        "answer": attempt["answer"],
        "won": attempt["won"],
        "error": attempt["error"],
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


if __name__ == "__main__":
    old = len(sys.argv) > 2 and sys.argv[2] == "--old-api"
    with open(sys.argv[1], "w") as f:
        json.dump([digest(c) for c in cases(old)], f, indent=1, ensure_ascii=False)
        f.write("\n")
