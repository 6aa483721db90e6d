"""The trainer's per-phase GPU peaks (Timer with a CudaPeaks probe): each lap reads its own window."""

from __future__ import annotations

from agemem.core.devicemem import CudaPeaks
from agemem.train.loop import Timer

GIB = 2**30


class ScriptedPeaks:
    """A probe whose windows peak at scripted (allocated, reserved) bytes, and that counts its resets."""

    def __init__(self, windows):
        self.windows = list(windows)
        self.reads = 0

    def read_and_reset(self):
        self.reads += 1
        return self.windows.pop(0)


def test_each_lap_records_the_peak_of_its_own_window():
    # window 0 (before the first step) is discarded: the timer starts a fresh window
    probe = ScriptedPeaks([(9 * GIB, 9 * GIB), (2 * GIB, 3 * GIB), (5 * GIB, 6 * GIB)])
    timer = Timer(gpu=probe)
    timer.lap("rollout")
    timer.lap("update")
    assert timer.gpu_peak_gib == {"rollout": 2.0, "update": 5.0}
    assert timer.gpu_reserved_gib == {"rollout": 3.0, "update": 6.0}
    assert probe.reads == 3


def test_no_probe_off_cuda():
    assert CudaPeaks.on("cpu") is None
    timer = Timer()
    timer.lap("rollout")
    assert timer.gpu_peak_gib == {} and timer.laps.keys() == {"rollout"}
