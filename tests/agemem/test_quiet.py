"""Third-party noise is dropped while a command runs (agemem.entrypoints.quiet) and only then; --verbose keeps it."""

from __future__ import annotations

import logging
import warnings

from agemem.entrypoints.quiet import quiet_third_party


def _emit() -> list[str]:
    """What a command's dependencies say on a CPU run: a deprecation notice raised inside transformers, our own
    warning, and two log lines of DeepSpeed and accelerate."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.warn_explicit("`is_gradient_checkpointing` is deprecated", FutureWarning, "x.py", 1, "transformers.x")
        warnings.warn_explicit("a warning of ours", UserWarning, "y.py", 1, "agemem.train.loop")
    logging.getLogger("DeepSpeed").warning("Setting accelerator to CPU. If you have GPU ...")
    accelerate = logging.getLogger("accelerate.utils.other")
    accelerate.warning("[RANK 0] Removed shared tensor {'lm_head.weight'} while saving.")
    accelerate.warning("Something else worth reading.")
    return [str(w.message) for w in caught]


class _Collect(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_noise_is_dropped_inside_the_block_and_only_there():
    # on each logger itself: DeepSpeed's does not propagate to the root once deepspeed is imported
    collect = _Collect()
    loggers = [logging.getLogger("DeepSpeed"), logging.getLogger("accelerate.utils.other")]
    for logger in loggers:
        logger.addHandler(collect)
    try:
        with quiet_third_party(load_models=False):
            inside = _emit()
        quiet_logs, collect.messages = collect.messages, []
        outside = _emit()  # the filters are gone with the block (tests run the CLI in-process)
    finally:
        for logger in loggers:
            logger.removeHandler(collect)
    assert inside == ["a warning of ours"]
    assert quiet_logs == ["Something else worth reading."]
    assert outside[0].startswith("`is_gradient_checkpointing`") and len(outside) == 2
    assert len(collect.messages) == 3


def test_transformers_bars_and_verbosity_are_restored():
    from transformers.utils import logging as transformers_logging

    before = (transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled())
    with quiet_third_party(load_models=True):
        assert not transformers_logging.is_progress_bar_enabled()
        assert transformers_logging.get_verbosity() == transformers_logging.ERROR
    assert (transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()) == before
