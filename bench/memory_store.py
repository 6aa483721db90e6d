"""What persistence costs: the SQLite long-term memory against the in-RAM store, side by side.

Per bank size, both stores get the same operations in the same process: single adds (one agent tool call
each, so one committed transaction each for SQLite), updates, deletes and top-k retrievals; for SQLite also
the time to open an existing file (a restarted agent rebuilding its index) and the file size. Vectors are
random unit vectors (D=384 like MiniLM) behind a lookup table, so encoding costs nothing on either side.

    python bench/memory_store.py                       # 1k and 10k entries
    python bench/memory_store.py --sizes 1000 --ops 50 --out bench/results/memory_store.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from agemem.core.encoders import l2_normalise
from agemem.core.ltm import LongTermMemory
from agemem.core.memory_store import SQLiteLongTermMemory


class RandomEncoder:
    """A fixed random unit vector per text (generated once, then looked up)."""

    name = "bench-random"

    def __init__(self, dim: int, seed: int):
        self.dim = dim
        self.rng = np.random.default_rng(seed)
        self.table: dict[str, np.ndarray] = {}

    def encode(self, texts: list[str]) -> np.ndarray:
        for text in texts:
            if text not in self.table:
                self.table[text] = l2_normalise(self.rng.standard_normal((1, self.dim)).astype(np.float32))[0]
        return np.stack([self.table[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def _timed_ms(calls) -> float:
    """Median milliseconds of the calls."""
    times = []
    for call in calls:
        start = time.perf_counter()
        call()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def _time_operations(store: LongTermMemory, extra: list[str]) -> dict[str, float]:
    """Median ms of single adds of ``extra``, then updates, top-5 retrievals and deletes of as many entries."""
    timings = {"add": _timed_ms(lambda text=text: store.add(text) for text in extra)}
    ids = [e.id for e in store.entries()][-len(extra) :]
    timings["update"] = _timed_ms(lambda i=i, mid=mid: store.update(mid, f"update {i}") for i, mid in enumerate(ids))
    timings["retrieve"] = _timed_ms(lambda i=i: store.retrieve(f"query {i}", 5) for i in range(len(extra)))
    timings["delete"] = _timed_ms(lambda mid=mid: store.delete(mid) for mid in ids)
    return timings


def bench_size(n: int, ops: int, dim: int, seed: int, directory: Path) -> dict:
    encoder = RandomEncoder(dim, seed)
    contents = [f"fact number {i}" for i in range(n + ops)]
    encoder.encode(contents + [f"update {i}" for i in range(ops)] + [f"query {i}" for i in range(ops)])
    path = directory / f"bank_{n}.sqlite"
    ram, disk = LongTermMemory(encoder), SQLiteLongTermMemory(encoder, path)
    for store in (ram, disk):  # the bank, loaded in bulk
        for begin in range(0, n, 1000):
            store.add_many(contents[begin : begin + 1000])
    row: dict = {"entries": n}
    for label, store in (("ram", ram), ("sqlite", disk)):
        row.update({f"{op}_ms_{label}": ms for op, ms in _time_operations(store, contents[n : n + ops]).items()})
    disk.close()
    start = time.perf_counter()
    reopened = SQLiteLongTermMemory(encoder, path)
    row["open_ms_sqlite"] = (time.perf_counter() - start) * 1000
    assert len(reopened) == len(ram), "the reopened file must hold what the RAM store holds"
    reopened.close()
    row["file_mb"] = path.stat().st_size / 2**20
    row["add_ratio"] = row["add_ms_sqlite"] / row["add_ms_ram"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--ops", type=int, default=100, help="timed operations of each kind per size")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results/memory_store.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [bench_size(n, args.ops, args.dim, args.seed, Path(tmp)) for n in tqdm(args.sizes, desc="bank sizes")]
    table = Table(title=f"LTM persistence: median ms per operation, RAM vs SQLite (D={args.dim})")
    for column in (
        "entries",
        "add RAM",
        "add SQLite",
        "update RAM",
        "update SQLite",
        "retrieve RAM",
        "retrieve SQLite",
        "delete RAM",
        "delete SQLite",
        "open file",
        "file MB",
    ):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{row['entries']:,}",
            *(
                f"{row[f'{op}_ms_{side}']:.3f}"
                for op in ("add", "update", "retrieve", "delete")
                for side in ("ram", "sqlite")
            ),
            f"{row['open_ms_sqlite']:.0f}",
            f"{row['file_mb']:.1f}",
        )
    Console().print(table)
    result = {"machine": platform.platform(), "python": platform.python_version(), "args": vars(args), "rows": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
