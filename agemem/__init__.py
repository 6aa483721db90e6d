"""AgeMem: an LLM agent that manages its long-term and short-term memory through tool calls.

Import what you need from the submodules; nothing heavy (torch, transformers, encoders) is
loaded until it is used. ``agemem.MemoryAgent`` runs an exported policy (see ``agemem export``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"
__all__ = ["MemoryAgent", "__version__"]

if TYPE_CHECKING:
    from agemem.entrypoints.agent import MemoryAgent


def __getattr__(name: str) -> Any:
    if name == "MemoryAgent":  # lazily: importing agemem must stay free of heavy imports
        from agemem.entrypoints.agent import MemoryAgent

        return MemoryAgent
    raise AttributeError(f"module 'agemem' has no attribute {name!r}")
