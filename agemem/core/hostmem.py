"""Host memory: measure a process's peak resident memory per stage, and keep glibc's heap from hoarding it.

A CPU training process allocates and frees tensors of every size on every step (the sequences change
length), and glibc's malloc keeps freed heap memory resident: it returns memory to the system only from
the top of a heap, and its mmap threshold grows with the largest block freed, so ever larger tensors come
from the heap. On `agemem learn` (a 1.1M-parameter model) this held 8 GB resident for under 2 GB in use.
:func:`release_freed_memory` hands the free pages back (``malloc_trim``); :class:`MemoryReleaser` does so
on a timer from a background thread while a stage runs. Measurements: docs/training.md#host-memory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import resource
import sys
import threading
from functools import cache
from types import TracebackType

GIB = 1 << 30


@cache
def _glibc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.malloc_trim  # noqa: B018 -- musl has no malloc_trim: treat it as "not glibc"
    except (OSError, AttributeError):
        return None
    return libc


def release_freed_memory() -> bool:
    """Return free heap pages to the system (glibc ``malloc_trim(0)``); False where there is no glibc."""
    libc = _glibc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def resident_bytes() -> int:
    """Current resident set size (``VmRSS``); 0 where /proc is not available."""
    return _status_field("VmRSS")


def peak_resident_bytes() -> int:
    """Peak resident set size since the process started or :func:`reset_peak` (``VmHWM`` on Linux,
    ``ru_maxrss`` elsewhere: then the process's lifetime peak)."""
    peak = _status_field("VmHWM")
    if peak:
        return peak
    scale = 1 if sys.platform == "darwin" else 1024  # macOS reports bytes, Linux kilobytes
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


# after a reset the peak equals the resident size; the slack absorbs pages touched between write and read-back
_RESET_SLACK_BYTES = 16 << 20


def reset_peak() -> bool:
    """Start a new peak window (Linux >= 4.0: writing 5 to ``/proc/self/clear_refs`` resets ``VmHWM``).

    True only where the window really restarted: some kernels and sandboxes accept the write and keep the
    old peak, so the peak is read back and must have fallen to the resident size (within 16 MiB)."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        return False
    peak, resident = _status_field("VmHWM"), _status_field("VmRSS")
    return bool(peak) and peak <= resident + _RESET_SLACK_BYTES


@cache
def peak_window_resets() -> bool:
    """Whether this process can measure peaks per window: raise the peak 64 MiB above the resident size (a
    touched, then freed mmap'd block), reset, and check it fell back. A kernel that ignores the reset would
    report the process's lifetime peak for every window; callers then report no per-window peak at all."""
    if not sys.platform.startswith("linux") or not _status_field("VmHWM"):
        return False
    block = bytearray(64 << 20)  # above glibc's largest mmap threshold (32 MiB): unmapped again on free
    block[:: resource.getpagesize()] = b"x" * len(block[:: resource.getpagesize()])
    del block
    return reset_peak()


def _status_field(name: str) -> int:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class MemoryReleaser:
    """``with MemoryReleaser(seconds):`` calls :func:`release_freed_memory` every ``seconds`` from a daemon
    thread (0 or no glibc: does nothing). glibc's trim takes the arena locks, so it is safe beside the
    allocating threads; it returns pages the process no longer uses, and a later allocation that needs them
    faults fresh zeroed pages in, which is the whole cost (measured in docs/training.md#host-memory).
    One releaser runs per process: a nested one (`agemem train` inside the `agemem learn` recipe) is a no-op."""

    _running: MemoryReleaser | None = None

    def __init__(self, seconds: float):
        if seconds < 0:
            raise ValueError(f"seconds={seconds} must be >= 0 (0 turns releasing off)")
        self.seconds = seconds
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryReleaser:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None):
        self.stop()

    def start(self) -> MemoryReleaser:
        if MemoryReleaser._running is None and self.seconds > 0 and _glibc() is not None:
            MemoryReleaser._running = self
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name="agemem-memory-releaser", daemon=True)
            self._thread.start()
        return self

    def release_now(self) -> None:
        """Return freed pages at once, where a phase has just dropped a lot (a rollout's KV caches, an update's
        activations), instead of waiting for the timer; nothing when releasing is off (``seconds=0``)."""
        if self.seconds > 0:
            release_freed_memory()

    def _run(self) -> None:
        while not self._stop.wait(self.seconds):
            release_freed_memory()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
            MemoryReleaser._running = None
            release_freed_memory()
