"""Generation engines: transformers (default), vLLM through TRL, OpenAI-compatible HTTP."""

from agemem.rollouts.engines.base import Completion, Engine, EngineError, EngineUnavailable, SamplingParams

__all__ = ["Completion", "Engine", "EngineError", "EngineUnavailable", "SamplingParams"]
