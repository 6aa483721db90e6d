"""LangMem (LangChain's ``langmem``) as a memory-system baseline.

Every observed message goes through ``create_memory_store_manager``: it searches the store for related
memories, then its LLM creates, updates (and, when enabled, deletes) memories through tool calls (``trustcall``),
and writes them to a LangGraph store. A search is the store's semantic search over the scope's namespace.

The store is LangGraph's ``InMemoryStore`` with a semantic index over the harness's sentence encoder; the chat
model is ``langchain_openai.ChatOpenAI`` pointed at the harness's endpoint. The model must emit tool calls for
LangMem to write anything, so its memory depends on the served model's tool-calling (a model that does not
call tools leaves it empty).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from agemem.eval.baselines.base import Recalled
from agemem.eval.baselines.libraries import LLMTarget, require, version_of
from agemem.eval.baselines.mem0 import langchain_embeddings

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder


class LangMemSystem:
    name = "langmem"

    def __init__(self, llm: LLMTarget, encoder: Encoder, *, enable_deletes: bool):
        create_manager = require("langmem", "create_memory_store_manager", extra="baselines")
        store_cls = require("langgraph.store.memory", "InMemoryStore", extra="baselines")
        chat_cls = require("langchain_openai", "ChatOpenAI", extra="baselines")
        logging.getLogger("langmem").setLevel(logging.WARNING)
        self.llm = llm
        self.encoder_name = encoder.name
        self.enable_deletes = enable_deletes
        embeddings = langchain_embeddings(encoder)
        self.store = store_cls(index={"dims": encoder.dim, "embed": embeddings})
        model = chat_cls(
            model=llm.model,
            base_url=llm.base_url,
            api_key=llm.api_key,
            temperature=llm.temperature,
            max_tokens=llm.max_tokens,
            max_retries=0,  # a failure is reported, not retried into a second call
            timeout=llm.timeout_s,
        )
        self.manager = create_manager(
            model, namespace=("memories", "{scope}"), store=self.store, enable_deletes=enable_deletes
        )

    @staticmethod
    def _config(scope: str) -> dict[str, Any]:
        return {"configurable": {"scope": scope}}

    def observe(self, text: str, scope: str) -> None:
        self.manager.invoke({"messages": [{"role": "user", "content": text}]}, config=self._config(scope))

    def search(self, query: str, top_k: int, scope: str) -> list[Recalled]:
        items = self.store.search(("memories", scope), query=query, limit=top_k)
        return [Recalled(item.key, _content(item.value), float(item.score or 0.0)) for item in items]

    def memories(self, scope: str) -> list[Recalled]:
        items = self.store.search(("memories", scope), limit=10_000)
        items = sorted(items, key=lambda item: item.created_at)
        return [Recalled(item.key, _content(item.value)) for item in items]

    def dump(self, scope: str) -> list[dict[str, Any]]:
        items = sorted(self.store.search(("memories", scope), limit=10_000), key=lambda item: item.created_at)
        return [{"key": item.key, "value": item.value} for item in items]

    def restore(self, records: list[dict[str, Any]], scope: str) -> None:
        for record in records:
            self.store.put(("memories", scope), record["key"], record["value"])

    def clear(self, scope: str) -> None:
        for item in self.store.search(("memories", scope), limit=10_000):
            self.store.delete(("memories", scope), item.key)

    def settings(self) -> dict[str, Any]:
        return {
            "library": f"langmem=={version_of('langmem')}",
            "store": f"langgraph=={version_of('langgraph')} InMemoryStore (semantic index)",
            "llm": {"model": self.llm.model, "temperature": self.llm.temperature, "max_tokens": self.llm.max_tokens},
            "embedder": self.encoder_name,
            "enable_deletes": self.enable_deletes,
        }

    def close(self) -> None:
        pass  # an in-memory store: nothing to release


def _content(value: dict[str, Any]) -> str:
    """A stored LangMem memory's text (unstructured memories keep it under content.content)."""
    content = value.get("content", value)
    if isinstance(content, dict):
        content = content.get("content", content)
    return str(content)
