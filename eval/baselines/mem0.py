"""Mem0 and Mem0g (Chhikara et al. 2025) as memory-system baselines, through the ``mem0ai`` package.

Mem0 (``--variant mem0``): every observed message goes to ``Memory.add``, whose LLM extracts facts and then
decides per fact to ADD, UPDATE, DELETE or do nothing against the most similar stored memories; a search is
``Memory.search`` (embedding similarity). Mem0g (``--variant mem0g``) adds Mem0's graph memory: the LLM also
extracts entities and relations (tool calls) into an embedded Kùzu graph database, and a search returns the
matching relations beside the memories.

Everything is embedded (no server): Qdrant in local mode, Kùzu on disk, Mem0's SQLite history, one folder per
run under the run's output. The embedder is the harness's sentence encoder (the same model AgeMem's memory
uses) handed to Mem0 through its ``langchain`` embedder provider. Mem0's telemetry is switched off.

``mem0ai`` 1.0.11 is pinned: the 2.x line dropped graph memory, and Mem0g is a row of the paper's table.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.eval.baselines.base import Recalled
from agemem.eval.baselines.libraries import ErrorCounter, LLMTarget, require, version_of

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder


def langchain_embeddings(encoder: Encoder) -> Any:
    """The harness's encoder as a LangChain ``Embeddings`` (what Mem0's ``langchain`` embedder and LangMem take)."""
    from langchain_core.embeddings import Embeddings

    class EncoderEmbeddings(Embeddings):
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return encoder.encode(list(texts)).tolist()

        def embed_query(self, text: str) -> list[float]:
            return encoder.encode([text])[0].tolist()

    return EncoderEmbeddings()


class Mem0System:
    """Mem0 (``graph=False``) or Mem0g (``graph=True``); a scope is a Mem0 ``user_id``."""

    def __init__(
        self,
        llm: LLMTarget,
        encoder: Encoder,
        folder: Path,
        *,
        graph: bool,
        search_threshold: float,
        relation_top_k: int = 0,
    ):
        os.environ.setdefault("MEM0_TELEMETRY", "False")  # read when mem0 is imported: no posthog calls home
        os.environ.setdefault("MEM0_DIR", str(folder / "mem0_home"))  # mem0 keeps a user-id file there
        memory_cls = require("mem0", "Memory", extra="baselines")
        # imported earlier (before the variable was set) mem0 would still phone home: its clients read this flag
        require("mem0.memory.telemetry", extra="baselines").MEM0_TELEMETRY = False
        logging.getLogger("mem0").setLevel(logging.WARNING)
        self.errors = ErrorCounter("mem0")
        self.name = "mem0g" if graph else "mem0"
        self.graph = graph
        self.folder = folder
        shutil.rmtree(folder, ignore_errors=True)  # a run's store starts empty; resumed runs re-insert
        folder.mkdir(parents=True, exist_ok=True)
        self.search_threshold = search_threshold
        self.relation_top_k = relation_top_k
        """Mem0g: relations per search (0: as many as memories)."""
        self.config: dict[str, Any] = {
            "llm": {
                "provider": "openai",
                "config": {
                    "model": llm.model,
                    "openai_base_url": llm.base_url,
                    "api_key": llm.api_key,
                    "temperature": llm.temperature,
                    "max_tokens": llm.max_tokens,
                },
            },
            "embedder": {
                "provider": "langchain",
                "config": {"model": langchain_embeddings(encoder), "embedding_dims": encoder.dim},
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": self.name,
                    "path": str(folder / "qdrant"),
                    "embedding_model_dims": encoder.dim,
                    "on_disk": True,
                },
            },
            "history_db_path": str(folder / "history.db"),
        }
        if graph:
            self.config["graph_store"] = {"provider": "kuzu", "config": {"db": str(folder / "graph.kuzu")}}
        self.memory = memory_cls.from_config(self.config)
        self.memory.llm.client = llm.openai_client()  # the run's timeout, no hidden retries
        if graph:
            self.memory.graph.llm.client = llm.openai_client()
        self.encoder_name = encoder.name

    def observe(self, text: str, scope: str) -> None:
        self.memory.add([{"role": "user", "content": text}], user_id=scope)

    def search(self, query: str, top_k: int, scope: str) -> list[Recalled]:
        """Up to ``top_k`` memories, best first, then (Mem0g) up to ``relation_top_k`` relations: a list of their
        own, which the harness shows apart (``relations``), so a scope holding more than k memories still shows
        them. Mem0g's search applies one limit to both lists; asking for the larger and cutting each keeps every
        list as the library ranks it (memories by similarity, relations by BM25 over the matched entities)."""
        relations_k = self.relation_top_k or top_k
        limit = max(top_k, relations_k) if self.graph else top_k
        found = self.memory.search(query, user_id=scope, limit=limit, threshold=self.search_threshold)
        memories = [Recalled(r["id"], r["memory"], float(r.get("score") or 0.0)) for r in found.get("results", [])]
        return memories[:top_k] + [_relation(r) for r in found.get("relations", [])[:relations_k]]

    def memories(self, scope: str) -> list[Recalled]:
        held = self.memory.get_all(user_id=scope, limit=10_000)
        rows = sorted(held.get("results", []), key=lambda r: r.get("created_at") or "")
        return [Recalled(r["id"], r["memory"]) for r in rows] + [_relation(r) for r in held.get("relations", [])]

    def dump(self, scope: str) -> list[dict[str, Any]]:
        return [{"text": r.text} for r in self.memories(scope) if r.kind == "memory"]

    def restore(self, records: list[dict[str, Any]], scope: str) -> None:
        """The memories back verbatim (``infer=False``); a graph's relations are not restored: rebuilding them
        would take the graph's LLM calls, booked on no episode."""
        if not records:
            return
        enable_graph, self.memory.enable_graph = self.memory.enable_graph, False
        try:
            self.memory.add([{"role": "user", "content": r["text"]} for r in records], user_id=scope, infer=False)
        finally:
            self.memory.enable_graph = enable_graph

    def clear(self, scope: str) -> None:
        for _ in range(10_000):  # Mem0 deletes at most the 100 memories its store lists per call
            self.memory.delete_all(user_id=scope)
            if not self.memory.get_all(user_id=scope, limit=1).get("results"):
                return

    def settings(self) -> dict[str, Any]:
        llm = self.config["llm"]["config"]
        return {
            "library": f"mem0ai=={version_of('mem0ai')}",
            "graph": f"kuzu=={version_of('kuzu')}" if self.graph else None,
            "llm": {k: llm[k] for k in ("model", "temperature", "max_tokens")},
            "embedder": self.encoder_name,
            "vector_store": "qdrant (local mode)",
            "search_threshold": self.search_threshold,
            "relation_top_k": (self.relation_top_k or "as many as memories") if self.graph else None,
            "infer": True,
            "llm_failures": self.errors.count,
        }

    def close(self) -> None:
        self.errors.detach()
        self.memory.close()  # its SQLite history
        client = getattr(getattr(self.memory, "vector_store", None), "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()  # local Qdrant holds a lock on its folder until closed


_RELATION_PREFIX = "relation: "


def _relation(row: dict[str, Any]) -> Recalled:
    source, relation = row.get("source", "?"), row.get("relationship", row.get("relation", "?"))
    target = row.get("destination", row.get("target", "?"))
    text = f"{_RELATION_PREFIX}{source} -- {relation} -- {target}"
    return Recalled(f"rel:{source}:{relation}:{target}", text, kind="relation")
