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


def test_noise_is_dropped_inside_the_block_and_only_there(caplog):
    with quiet_third_party(load_models=False):
        inside = _emit()
    quiet_logs, caplog.records[:] = [r.getMessage() for r in caplog.records], []
    assert inside == ["a warning of ours"]
    assert quiet_logs == ["Something else worth reading."]
    outside = _emit()  # the filters are gone with the block (tests run the CLI in-process)
    assert outside[0].startswith("`is_gradient_checkpointing`") and len(outside) == 2
    assert len(caplog.records) == 3


def test_transformers_bars_and_verbosity_are_restored():
    from transformers.utils import logging as transformers_logging

    before = (transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled())
    with quiet_third_party(load_models=True):
        assert not transformers_logging.is_progress_bar_enabled()
        assert transformers_logging.get_verbosity() == transformers_logging.ERROR
    assert (transformers_logging.get_verbosity(), transformers_logging.is_progress_bar_enabled()) == before
