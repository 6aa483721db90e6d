"""A-Mem (Xu et al. 2025, "A-MEM: Agentic Memory for LLM Agents") as a memory-system baseline.

The package is ``a-mem`` on the package index (module ``agentic_memory``, from DiaaAj/a-mem-mcp, a maintained
fork of the authors' agiresearch/A-mem with the same ``AgenticMemorySystem``). The similarly named
``agentic-memory`` package is an unrelated graph kernel (ContextOS); do not install it for this.

Every observed message becomes a note (``add_note``): the LLM writes its keywords, context and tags, then
decides whether the note evolves its nearest neighbours (links, updated contexts and tags). The note's content
is the message itself, so A-Mem never loses a fact to a failed extraction; what its LLM adds is the metadata and
the links. A search is ``search_agentic``: the k nearest notes by embedding (the library appends their linked
neighbours and then cuts the list to k, so a neighbour shows only when fewer than k notes match).

Each scope is its own ``AgenticMemorySystem`` over an embedded ChromaDB folder; notes are embedded with the
harness's sentence-transformers model (by path, so nothing is downloaded). Chroma's telemetry is off.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agemem.eval.baselines.base import Recalled
from agemem.eval.baselines.libraries import ErrorCounter, LLMTarget, require, version_of


class AMemSystem:
    name = "amem"

    def __init__(self, llm: LLMTarget, encoder_path: str, folder: Path):
        os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")  # chromadb reads it when it starts
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm (imported by A-Mem) stays offline
        module = require("agentic_memory.memory_system", extra="baselines")
        self.system_cls, self.note_cls = module.AgenticMemorySystem, module.MemoryNote
        for noisy in ("agentic_memory", "chromadb"):
            logging.getLogger(noisy).setLevel(logging.WARNING)
        self.llm = llm
        self.encoder_path = encoder_path
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True, exist_ok=True)
        self._systems: dict[str, Any] = {}
        self._order: dict[str, list[str]] = {}
        self._fresh = itertools.count()  # a new folder per scope: Chroma caches clients by path
        self.printed_failures = 0
        """A-Mem's printed reports of an LLM reply it could not use (it goes on with default metadata)."""
        self.logged = ErrorCounter("agentic_memory")  # its evolution failures are logged errors instead

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        """A-Mem prints its LLM failures to stdout (over the progress bar): count them, log them at debug level."""
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            yield
        for line in printed.getvalue().splitlines():
            if line.startswith("Error"):
                self.printed_failures += 1
            logging.getLogger(__name__).debug("a-mem: %s", line)

    def _system(self, scope: str) -> Any:
        if scope not in self._systems:
            system = self.system_cls(
                model_name=self.encoder_path,
                llm_backend="openai",
                llm_model=self.llm.model,
                api_key=self.llm.api_key,
                storage_path=str(self.folder / f"scope_{next(self._fresh):06d}"),
            )
            # A-Mem's OpenAI controller reads no base URL: point its client at the harness's endpoint
            system.llm_controller.llm.client = self.llm.openai_client()
            self._systems[scope] = system
            self._order[scope] = []
        return self._systems[scope]

    def observe(self, text: str, scope: str) -> None:
        self._order.setdefault(scope, [])
        with self._quiet():
            note_id = self._system(scope).add_note(text)
        self._order[scope].append(note_id)

    def search(self, query: str, top_k: int, scope: str) -> list[Recalled]:
        if scope not in self._systems:
            return []
        system = self._systems[scope]
        with self._quiet():
            found = system.search_agentic(query, k=top_k)
        recalled = []
        for row in found:  # search_agentic returns a note's metadata, not its content: read the note
            note = system.read(row["id"])
            if note is not None:
                recalled.append(Recalled(row["id"], _note_text(vars(note)), _similarity(row)))
        return recalled

    def memories(self, scope: str) -> list[Recalled]:
        system = self._systems.get(scope)
        if system is None:
            return []
        notes = [(note_id, system.read(note_id)) for note_id in self._order[scope]]
        return [Recalled(note_id, _note_text(vars(note))) for note_id, note in notes if note is not None]

    def dump(self, scope: str) -> list[dict[str, Any]]:
        """Each note whole (content, keywords, context, tags, links, ...), oldest first."""
        system = self._systems.get(scope)
        if system is None:
            return []
        notes = (system.read(note_id) for note_id in self._order[scope])
        return [dict(vars(note)) for note in notes if note is not None]

    def restore(self, records: list[dict[str, Any]], scope: str) -> None:
        """The notes written back as they were, straight into Chroma and A-Mem's cache: ``add_note`` would ask the
        LLM again (analysis, evolution) and could rewrite the neighbours."""
        system = self._system(scope)
        for record in records:
            note = self.note_cls(**record)
            system.retriever.add_document(note.content, system._memory_note_to_metadata(note), note.id)
            if system.cache_enabled:
                system.cache.put(note.id, note)
            self._order[scope].append(note.id)

    def clear(self, scope: str) -> None:
        system = self._systems.pop(scope, None)
        self._order.pop(scope, None)
        if system is not None:
            system.retriever.client.close()  # Chroma keeps every client (and its open files) until closed
            shutil.rmtree(system.storage_path, ignore_errors=True)

    def settings(self) -> dict[str, Any]:
        return {
            "library": f"a-mem=={version_of('a-mem')}",
            "vector_store": f"chromadb=={version_of('chromadb')} (embedded)",
            "llm": {"model": self.llm.model, "temperature": "A-Mem's own (1.0)", "max_tokens": self.llm.max_tokens},
            "embedder": self.encoder_path,
            "search": "search_agentic (the k nearest notes; linked neighbours only within k)",
            "llm_failures": self.printed_failures + self.logged.count,
        }

    def close(self) -> None:
        self.logged.detach()
        for scope in list(self._systems):
            self.clear(scope)


def _note_text(note: dict[str, Any]) -> str:
    """A note as the agent sees it: its content, then the context and tags A-Mem's LLM wrote for it."""
    context, tags = note.get("context") or "", note.get("tags") or []
    extra = "; ".join(part for part in (context, ", ".join(map(str, tags))) if part and part != "General")
    return f"{note.get('content', '')}\n(context: {extra})" if extra else str(note.get("content", ""))


def _similarity(row: dict[str, Any]) -> float:
    score = row.get("score")
    return 0.0 if score is None else round(1.0 - float(score), 4)  # Chroma returns a distance
