"""A memory system for tests that needs no library: it keeps every message it observes, verbatim."""

from __future__ import annotations

from agemem.eval.baselines import Recalled
from agemem.eval.baselines.endpoint import UsageMeter


class ListSystem:
    """Remembers every message verbatim; each observe costs one 'LLM call' of len(text) prompt tokens."""

    name = "list"

    def __init__(self, meter: UsageMeter):
        self.meter = meter
        self.held: dict[str, list[str]] = {}

    def observe(self, text, scope):
        self.meter.book(len(text), 1)
        self.held.setdefault(scope, []).append(text)

    def search(self, query, top_k, scope):
        hits = [t for t in self.held.get(scope, []) if set(query.split()) & set(t.split())]
        return [Recalled(f"m{i}", t, 1.0) for i, t in enumerate(hits[:top_k])]

    def memories(self, scope):
        return [Recalled(f"m{i}", t) for i, t in enumerate(self.held.get(scope, []))]

    def dump(self, scope):
        return [{"text": t} for t in self.held.get(scope, [])]

    def restore(self, records, scope):
        self.held.setdefault(scope, []).extend(r["text"] for r in records)

    def clear(self, scope):
        self.held.pop(scope, None)

    def settings(self):
        return {}

    def close(self):
        pass
