"""Third-party noise off while an `agemem` command runs; ``agemem --verbose COMMAND`` keeps all of it.

What is dropped is what a user cannot act on: transformers' and accelerate's deprecation notices about call
forms inside the libraries, DeepSpeed's "Setting accelerator to CPU" on a machine without a GPU (our own setup
line says the device), accelerate's "Removed shared tensor" at every checkpoint of a model with tied embeddings
(the tie is restored on load), transformers' info logs and its "Loading weights" bars. Our own warnings and
every error stay. Everything is restored when the command ends (tests call the CLI in-process).
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

NOISY_LIBRARIES = r"(transformers|accelerate|peft|trl|deepspeed)(\.|$)"
"""modules whose FutureWarning / DeprecationWarning notices are dropped."""
DROPPED_LOG_LINES = {
    "DeepSpeed": ("Setting accelerator to CPU",),
    "accelerate.utils.other": ("Removed shared tensor",),
}
"""logger name -> phrases whose records are dropped (accelerate prefixes its messages with "[RANK n] ")."""


class _DropPhrases(logging.Filter):
    def __init__(self, phrases: tuple[str, ...]):
        super().__init__()
        self.phrases = phrases

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        return not any(phrase in message for phrase in self.phrases)


@contextlib.contextmanager
def quiet_third_party(*, load_models: bool) -> Iterator[None]:
    """Drop the noise above while the block runs. ``load_models``: the command loads models, so transformers'
    verbosity and progress bars are set too (importing transformers costs about 0.6 s, spared elsewhere)."""
    filters = [(logging.getLogger(name), _DropPhrases(phrases)) for name, phrases in DROPPED_LOG_LINES.items()]
    for logger, log_filter in filters:
        logger.addFilter(log_filter)  # kept by DeepSpeed's logger setup, which resets the level only
    restore_transformers = _quiet_transformers() if load_models else None
    try:
        with warnings.catch_warnings():
            for category in (FutureWarning, DeprecationWarning):
                warnings.filterwarnings("ignore", category=category, module=NOISY_LIBRARIES)
            yield
    finally:
        for logger, log_filter in filters:
            logger.removeFilter(log_filter)
        if restore_transformers is not None:
            restore_transformers()


def _quiet_transformers():
    try:
        from transformers.utils import logging as transformers_logging
    except ImportError:  # pragma: no cover - transformers is a dependency
        return None
    verbosity = transformers_logging.get_verbosity()
    bars = transformers_logging.is_progress_bar_enabled()
    transformers_logging.set_verbosity_error()
    transformers_logging.disable_progress_bar()

    def restore() -> None:
        transformers_logging.set_verbosity(verbosity)
        if bars:
            transformers_logging.enable_progress_bar()

    return restore
