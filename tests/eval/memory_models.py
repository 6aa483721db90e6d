"""A scripted model (tests only) that answers the memory-system libraries' own prompts as a capable LLM would,
so the real Mem0, Mem0g, A-Mem and LangMem code paths can be checked for what they store and what the agent is
shown, and the agent's questions from the memories shown to it.

It recognises each library's prompt by a phrase of that prompt (the libraries' pinned versions) and replies in
the format the library parses: JSON for Mem0's fact extraction and update and for A-Mem's analysis and
evolution, ``<tool_call>`` blocks (returned as OpenAI tool calls by the harness's endpoint) for Mem0g's graph
and for LangMem.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tests.eval.agents import answer

MEM0_EXTRACT = "Personal Information Organizer"
MEM0_UPDATE = "smart memory manager"
MEM0G_ENTITIES = "understands entities and their types"
MEM0G_RELATIONS = "extract structured information from text to construct knowledge graphs"
MEM0G_DELETE = "graph memory manager specializing"
LANGMEM = "long-term memory manager maintaining a core store"
AMEM_ANALYSE = "Generate a structured analysis"
AMEM_EVOLVE = "memory evolution agent"


def tool_call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': arguments})}</tool_call>"


class MemorySystemsModel:
    """``facts``: the sentences worth remembering; ``answers``: question -> answer given when a memory shown to
    the agent contains ``evidence[question]``. ``calls`` counts the prompts answered per library phrase."""

    def __init__(self, facts: Sequence[str], answers: dict[str, str], evidence: dict[str, str]):
        self.facts = list(facts)
        self.answers = answers
        self.evidence = evidence
        self.calls: dict[str, int] = {}
        self._extracted: list[str] = []
        self._stored: set[str] = set()

    def _found(self, text: str) -> list[str]:
        return [fact for fact in self.facts if fact in text]

    def _count(self, kind: str) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1

    def __call__(self, conversation: list[dict[str, Any]]) -> str:
        prompt = "\n".join(str(m.get("content") or "") for m in conversation)
        last_user = next(m["content"] for m in reversed(conversation) if m["role"] == "user")
        if MEM0_EXTRACT in prompt:
            self._count("mem0_extract")
            self._extracted = self._found(last_user)
            return json.dumps({"facts": self._extracted})
        if MEM0_UPDATE in prompt:
            self._count("mem0_update")
            events = [{"id": str(i), "text": fact, "event": "ADD"} for i, fact in enumerate(self._extracted)]
            return json.dumps({"memory": events})
        if MEM0G_ENTITIES in prompt:
            self._count("mem0g_entities")
            found = self._found(last_user)
            entities = [{"entity": _subject(f), "entity_type": "topic"} for f in found]
            return tool_call("extract_entities", {"entities": entities}) if entities else ""
        if MEM0G_RELATIONS in prompt:
            self._count("mem0g_relations")
            found = self._found(last_user)
            relations = [
                {"source": _subject(f), "relationship": "is_described_as", "destination": "fact"} for f in found
            ]
            return tool_call("establish_relationships", {"entities": relations}) if relations else ""
        if MEM0G_DELETE in prompt:
            self._count("mem0g_delete")
            return ""  # nothing to delete
        if LANGMEM in prompt:
            self._count("langmem")
            # LangMem shows the memories it already holds beside the new message: a capable model adds only the new
            fresh = [fact for fact in self._found(prompt) if fact not in self._stored]
            self._stored.update(fresh)
            return "".join(tool_call("Memory", {"content": fact}) for fact in fresh)
        if AMEM_ANALYSE in prompt:
            self._count("amem_analyse")
            return json.dumps({"keywords": ["k1", "k2"], "context": "a scripted context", "tags": ["t1"]})
        if AMEM_EVOLVE in prompt:
            self._count("amem_evolve")
            return json.dumps(
                {
                    "should_evolve": False,
                    "actions": [],
                    "suggested_connections": [],
                    "tags_to_update": [],
                    "new_context_neighborhood": [],
                    "new_tags_neighborhood": [],
                }
            )
        self._count("agent")
        if last_user in self.answers:
            shown = "\n".join(_memories_shown(conversation))
            return answer(self.answers[last_user] if self.evidence[last_user] in shown else "unknown")
        return answer("OK")


def _subject(fact: str) -> str:
    return fact.split()[0].strip(".,").lower()


def _memories_shown(conversation: list[dict[str, Any]]) -> list[str]:
    """The memory texts in the retrieval blocks shown to the agent (tool messages holding JSON)."""
    texts = []
    for message in conversation:
        if message["role"] != "tool":
            continue
        try:
            payload = json.loads(message["content"])
        except ValueError:
            continue
        texts += [m.get("content", "") for m in payload.get("memories", [])]
    return texts
