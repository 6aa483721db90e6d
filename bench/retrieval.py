"""Top-k retrieval latency of the LTM store against a plain Python loop over entries.

The loop is how the authors' released store searches: score each entry in Python, sort,
take k. Both sides search the same unit vectors (random, D=384 like MiniLM) with the same
queries, in the same process, interleaved, so the ratio is robust to a noisy machine.
Query encoding is excluded (a lookup table stands in for the encoder on both sides).

    python bench/retrieval.py                    # 1k, 10k, 100k entries
    python bench/retrieval.py --sizes 1000 --queries 20 --out bench/results/retrieval.json
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table
from tqdm import tqdm

from agemem.core.encoders import l2_normalise
from agemem.core.ltm import LongTermMemory


class LookupEncoder:
    """Returns precomputed vectors for known texts, so encoding costs nothing on either side."""

    name = "bench-lookup"

    def __init__(self, table: dict[str, np.ndarray], dim: int):
        self.table = table
        self.dim = dim

    def encode(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.table[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)


def python_loop_top_k(entries: list[tuple[str, np.ndarray]], query_D: np.ndarray, k: int) -> list[str]:
    """The baseline: one Python-level similarity per entry, then a full sort."""
    scored = [(float(np.dot(vector_D, query_D)), entry_id) for entry_id, vector_D in entries]
    scored.sort(key=lambda pair: pair[0], reverse=True)
    return [entry_id for _, entry_id in scored[:k]]


def bench_size(n: int, dim: int, n_queries: int, top_k: int, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    vectors_ND = l2_normalise(rng.standard_normal((n, dim)).astype(np.float32))
    queries_QD = l2_normalise(rng.standard_normal((n_queries, dim)).astype(np.float32))
    texts = [f"entry {i}" for i in range(n)]
    query_texts = [f"query {i}" for i in range(n_queries)]
    encoder = LookupEncoder({**dict(zip(texts, vectors_ND)), **dict(zip(query_texts, queries_QD))}, dim)

    store = LongTermMemory(encoder, max_top_k=top_k)
    start = time.perf_counter()
    for begin in range(0, n, 10_000):
        store.add_many(texts[begin : begin + 10_000])
    build_s = time.perf_counter() - start
    loop_entries = [(e.id, e.embedding_D) for e in store.entries()]

    ours_ms, loop_ms, agree = [], [], 0
    for query_text, query_D in zip(query_texts, queries_QD):
        start = time.perf_counter()
        result = store.retrieve(query_text, top_k=top_k)
        ours_ms.append(1e3 * (time.perf_counter() - start))
        start = time.perf_counter()
        baseline_ids = python_loop_top_k(loop_entries, query_D, top_k)
        loop_ms.append(1e3 * (time.perf_counter() - start))
        agree += [e.id for e in result.entries] == baseline_ids
    ours, loop = statistics.median(ours_ms), statistics.median(loop_ms)
    return {
        "entries": n,
        "dim": dim,
        "top_k": top_k,
        "queries": n_queries,
        "store_median_ms": ours,
        "store_p90_ms": float(np.percentile(ours_ms, 90)),
        "python_loop_median_ms": loop,
        "python_loop_p90_ms": float(np.percentile(loop_ms, 90)),
        "speedup": loop / ours,
        "same_top_k": agree / n_queries,
        "bulk_add_entries_per_s": n / build_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--top-k", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="bench/results/retrieval.json")
    args = parser.parse_args()

    rows = [bench_size(n, args.dim, args.queries, args.top_k, args.seed) for n in tqdm(args.sizes, desc="sizes")]
    table = Table(title=f"LTM top-{args.top_k} retrieval, D={args.dim}, median of {args.queries} queries")
    for column in ("entries", "store ms", "python loop ms", "speed-up", "same top-k", "bulk add /s"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(
            f"{row['entries']:,}",
            f"{row['store_median_ms']:.3f}",
            f"{row['python_loop_median_ms']:.2f}",
            f"{row['speedup']:.0f}×",
            f"{row['same_top_k']:.0%}",
            f"{row['bulk_add_entries_per_s']:,.0f}",
        )
    Console().print(table)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    machine = {"python": platform.python_version(), "machine": platform.machine(), "numpy": np.__version__}
    out.write_text(json.dumps({"machine": machine, "args": vars(args), "results": rows}, indent=2))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
