"""What every memory-system adapter needs from outside: the LLM it calls, and its library, imported lazily."""

from __future__ import annotations

import importlib
import logging
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from agemem.core.configlib import ConfigError


@dataclass(frozen=True)
class LLMTarget:
    """The OpenAI-compatible endpoint a memory system drives (the harness's metered endpoint)."""

    base_url: str
    """``http://host:port/v1``."""
    model: str
    """the model name sent with every request."""
    api_key: str = "EMPTY"
    temperature: float = 0.0
    max_tokens: int = 1024
    timeout_s: float = 600.0

    def openai_client(self) -> Any:
        """An ``openai.OpenAI`` client for this endpoint: the run's timeout, and no retries (a retried call would be
        a second call the harness books; a failure is reported instead)."""
        openai = require("openai", extra="baselines")
        return openai.OpenAI(base_url=self.base_url, api_key=self.api_key, timeout=self.timeout_s, max_retries=0)


def require(module: str, attribute: str | None = None, *, extra: str) -> Any:
    """``module`` (or ``module.attribute``), or a ConfigError that says which extra installs it."""
    try:
        imported = importlib.import_module(module)
    except ImportError as err:
        raise ConfigError(
            f"this memory-system baseline needs the package that provides {module!r} ({err}); "
            f'install the pinned baselines with: pip install "agemem[{extra}]"'
        ) from err
    return getattr(imported, attribute) if attribute else imported


def version_of(distribution: str) -> str:
    """The installed version of ``distribution`` ("missing" when it is not installed)."""
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "missing"


class ErrorCounter(logging.Handler):
    """Counts the ERROR records a library logs (Mem0 logs an LLM reply it cannot parse and goes on without it)."""

    def __init__(self, logger: str):
        super().__init__(logging.ERROR)
        self.count = 0
        self.logger = logging.getLogger(logger)
        self.logger.addHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    def detach(self) -> None:
        self.logger.removeHandler(self)
