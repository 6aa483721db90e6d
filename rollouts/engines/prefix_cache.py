"""Prefix caching for the transformers engine: keep the KV of each finished row and reuse it.

An agent's next prompt extends its last one (prompt, reply, tool response), so a rollout step re-reads
hundreds of tokens it has already read. Without reuse the prompt pass (prefill) is most of a rollout's
cost on a CPU: 64 episodes of ~450-token contexts spend ~0.9 s a step on prefill against ~30 generated
tokens a reply (tiny policy). vLLM calls the remedy automatic prefix caching; this is the same idea for
the in-process engine.

Each entry is the token sequence a row's KV was computed for (its prompt and every generated token but
the last, which was sampled and never fed back) and that KV, ``[H, T, D]`` per layer. A lookup finds
the entry sharing the longest prefix with a prompt, not only entries that are whole prefixes of it: the
chat template re-tokenizes a reply's text, and a sampled token sequence that is not the tokenizer's own
splitting of that text diverges there, while everything before still matches. Prefixes are found through
an index of chained hashes of 16-token blocks (as vLLM's block hashes), so a lookup costs one dict probe
a block instead of a comparison against every entry; the last partial block is matched token by token.

Entries are evicted least recently used first once they hold more than ``capacity_tokens`` tokens, and a
row's new entry replaces the one it continued. A KV is only valid for the weights that computed it:
:meth:`PrefixCache.validate` clears the cache when the model's parameters were modified in place since
the entries were written (an optimizer step, ``load_state_dict``), so a training loop that shares the
policy with the engine never reads stale KV.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

BLOCK = 16
"""tokens a hashed block covers; a reused prefix is found to the block, then extended token by token."""


@dataclass(frozen=True, eq=False)
class CachedPrefix:
    tokens: tuple[int, ...]
    """the token ids the KV was computed for, in order."""
    keys_LHTD: tuple[torch.Tensor, ...]
    """per layer, ``[kv_heads, T, head_dim]`` keys (after RoPE, as the attention layers cache them)."""
    values_LHTD: tuple[torch.Tensor, ...]
    """per layer, ``[kv_heads, T, head_dim]`` values."""


def weights_version(model: torch.nn.Module) -> int:
    """A number that changes whenever any parameter is modified in place.

    Every in-place write to a tensor (``optimizer.step``, ``copy_`` in ``load_state_dict``) bumps its
    version counter; their sum therefore moves with any weight update, at the cost of reading one
    integer per parameter."""
    return sum(parameter._version for parameter in model.parameters())


def block_hashes(tokens: Sequence[int]) -> Iterator[int]:
    """Chained hashes of the full ``BLOCK``-token blocks of ``tokens``: the i-th depends on blocks 0..i."""
    chained = 0
    for start in range(0, len(tokens) - BLOCK + 1, BLOCK):
        chained = hash((chained, *tokens[start : start + BLOCK]))
        yield chained


class PrefixCache:
    """Least-recently-used store of row KVs, found by shared prefix (see the module docstring)."""

    def __init__(self, capacity_tokens: int):
        if capacity_tokens < 0:
            raise ValueError(f"capacity_tokens={capacity_tokens} must be >= 0 (0 turns prefix caching off)")
        self.capacity_tokens = capacity_tokens
        self._entries: OrderedDict[int, CachedPrefix] = OrderedDict()  # by id(), least recently used first
        self._blocks: dict[int, dict[int, CachedPrefix]] = {}  # block hash -> the entries holding that prefix
        self._tokens = 0
        self._weights_version: int | None = None

    @property
    def enabled(self) -> bool:
        return self.capacity_tokens > 0

    @property
    def cached_tokens(self) -> int:
        return self._tokens

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
        self._blocks.clear()
        self._tokens = 0

    def validate(self, model: torch.nn.Module) -> None:
        """Drop every entry if ``model``'s weights changed since the entries were computed."""
        version = weights_version(model)
        if version != self._weights_version:
            self.clear()
            self._weights_version = version

    def lookup(self, prompt: Sequence[int]) -> tuple[CachedPrefix | None, int]:
        """The entry sharing the longest prefix with ``prompt`` and that prefix's length (``(None, 0)``
        when no entry shares a whole block). The entry becomes the most recently used."""
        found: CachedPrefix | None = None
        blocks = 0
        for chained in block_hashes(prompt):
            holders = self._blocks.get(chained)
            if not holders:
                break
            found, blocks = next(iter(holders.values())), blocks + 1
        if found is None:
            return None, 0
        shared = blocks * BLOCK
        if tuple(prompt[:shared]) != found.tokens[:shared]:  # a hash collision: reuse nothing rather than wrong KV
            return None, 0
        limit = min(len(prompt), len(found.tokens))
        while shared < limit and prompt[shared] == found.tokens[shared]:
            shared += 1
        self._entries.move_to_end(id(found))
        return found, shared

    def insert(self, entry: CachedPrefix, *, replaces: CachedPrefix | None = None) -> None:
        """Store ``entry``, evicting the least recently used entries beyond ``capacity_tokens``.

        ``replaces``: the entry ``entry`` continued. A conversation moves forward, so its older prefix is
        dropped: the cache holds about one entry per live conversation, not one per turn (another row
        that still needed it recomputes those tokens; nothing else changes)."""
        size = len(entry.tokens)
        if not self.enabled or size == 0 or size > self.capacity_tokens:
            return
        if replaces is not None and id(replaces) in self._entries:
            self._remove(replaces)
        self._entries[id(entry)] = entry
        for chained in block_hashes(entry.tokens):
            self._blocks.setdefault(chained, {})[id(entry)] = entry
        self._tokens += size
        while self._tokens > self.capacity_tokens:
            self._remove(next(iter(self._entries.values())))

    def _remove(self, entry: CachedPrefix) -> None:
        del self._entries[id(entry)]
        self._tokens -= len(entry.tokens)
        for chained in block_hashes(entry.tokens):
            holders = self._blocks.get(chained)
            if holders is not None:
                holders.pop(id(entry), None)
                if not holders:
                    del self._blocks[chained]
