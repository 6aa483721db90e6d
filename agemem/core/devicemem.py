"""Device (GPU) memory as torch's caching allocator sees it: the peaks of a window, for per-phase readings.

The host-side twin is :mod:`agemem.core.hostmem`. Nothing here runs without CUDA: :meth:`CudaPeaks.on` gives None
for any other device, so CPU runs log no GPU keys.
"""

from __future__ import annotations

from typing import Any


class CudaPeaks:
    """Peak bytes allocated (held by tensors) and reserved (held by the allocator from the device) on one CUDA
    device since the previous :meth:`read_and_reset` (``torch.cuda.max_memory_allocated`` / ``_reserved``)."""

    def __init__(self, device: Any) -> None:
        self.device = device

    @classmethod
    def on(cls, device: Any) -> CudaPeaks | None:
        """A probe for ``device`` when it is a CUDA device, else None."""
        import torch

        device = torch.device(device)
        return cls(device) if device.type == "cuda" and torch.cuda.is_available() else None

    def read_and_reset(self) -> tuple[int, int]:
        """(peak allocated, peak reserved) bytes of the window now closing; a new window starts."""
        import torch

        peaks = torch.cuda.max_memory_allocated(self.device), torch.cuda.max_memory_reserved(self.device)
        torch.cuda.reset_peak_memory_stats(self.device)
        return peaks
