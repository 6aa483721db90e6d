"""A sweep: several strategies on the same stream, one comparison table and one figure.

The sweep file (YAML; ``configs/sweeps/stream_*.yaml``) has four keys, all optional but at least one strategy:

```yaml
base:                    # overrides applied to every strategy (after --config and the command line)
  stream.task: hotpotqa
  stream.limit: 100
strategies:              # named strategies: each a mapping (or a list of key=value strings) of overrides
  no_memory: {stream.retrieval: none, stream.addition: fixed}
  exprecent: {stream.retrieval: recent}
  remem: {stream.agent: remem}
grid:                    # the cartesian product of these values; each combination is one strategy, named
  stream.addition: [add_all, strict]   # by its values joined with "+" (e.g. strict+history; a number as key=value,
  stream.deletion: [none, history]     # e.g. lru+noisy_writes=3)
reference: add_all+none  # the strategy the others are sign-tested against (default: the first)
```

Each strategy runs into ``<out>/<strategy>/`` (resumable); ``<out>/comparison.{json,md,png}`` compares them.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError, from_dict, parse_override, read_yaml, set_dotted, to_dict
from agemem.eval.report import slug
from agemem.eval.stream.analysis import paired_comparison
from agemem.eval.stream.config import StreamRunConfig
from agemem.eval.stream.evaluate import Shared, run_one, write_outputs

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.eval.models import Backend
    from agemem.eval.stream.addition import CoarseJudge
    from agemem.eval.stream.base import Solver

_KEYS = ("base", "strategies", "grid", "reference")


@dataclass
class SweepSpec:
    base: dict[str, Any]
    """dotted key -> value, applied to every strategy."""
    strategies: dict[str, dict[str, Any]]
    """strategy name -> its dotted overrides, in run order."""
    reference: str
    """the strategy the others are compared with."""


def _overrides(value: Any, where: str) -> dict[str, Any]:
    """A mapping of dotted keys, or a list of ``key=value`` strings (values read as on the command line)."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return {str(k): v for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return dict(parse_override(v) for v in value)
    raise ConfigError(f"{where} must be a mapping of dotted keys or a list of key=value strings, got {value!r}")


def parse_sweep(data: dict[str, Any], source: str = "sweep") -> SweepSpec:
    unknown = sorted(set(data) - set(_KEYS))
    if unknown:
        raise ConfigError(f"{source}: unknown key {unknown[0]!r}; a sweep file has {', '.join(_KEYS)}")
    strategies: dict[str, dict[str, Any]] = {}
    named = data.get("strategies") or {}
    if not isinstance(named, dict):
        raise ConfigError(f"{source}: strategies must map a strategy name to its overrides")
    for name, value in named.items():
        strategies[str(name)] = _overrides(value, f"{source}: strategies.{name}")
    grid = data.get("grid") or {}
    if not isinstance(grid, dict) or not all(isinstance(v, list) and v for v in grid.values()):
        raise ConfigError(f"{source}: grid must map a dotted key to a non-empty list of values")
    keys = list(grid)
    for combination in itertools.product(*(grid[k] for k in keys)) if keys else ():
        name = "+".join(v if isinstance(v, str) else f"{k.rsplit('.', 1)[-1]}={v}" for k, v in zip(keys, combination))
        if name in strategies:
            raise ConfigError(f"{source}: strategy {name!r} is both named and in the grid; rename one")
        strategies[name] = dict(zip(keys, combination))
    if not strategies:
        raise ConfigError(f"{source}: no strategy; list some under strategies: or grid:")
    reference = data.get("reference") or next(iter(strategies))
    if reference not in strategies:
        raise ConfigError(f"{source}: reference {reference!r} is not a strategy; choose one of {', '.join(strategies)}")
    slugs = [slug(name) for name in strategies]
    if len(set(slugs)) != len(slugs):
        raise ConfigError(f"{source}: two strategy names map to the same folder name; rename one")
    return SweepSpec(_overrides(data.get("base"), f"{source}: base"), strategies, str(reference))


def load_sweep(path: str | Path) -> SweepSpec:
    return parse_sweep(read_yaml(path), str(path))


def strategy_config(config: StreamRunConfig, *layers: dict[str, Any]) -> StreamRunConfig:
    """``config`` with the layers of dotted overrides applied in order, validated."""
    raw = to_dict(config)
    for layer in layers:
        for key, value in layer.items():
            set_dotted(raw, key, value)
    return from_dict(type(config), raw)  # the caller's root: its sections stay, whichever they are


def run_sweep(
    config: StreamRunConfig,
    spec: SweepSpec,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
    solver: Solver | None = None,
    coarse: CoarseJudge | None = None,
) -> list[dict[str, Any]]:
    """Run every strategy of ``spec`` and write the comparison; returns the runs' results (reference marked)."""
    out = Path(out)
    configs = {name: strategy_config(config, spec.base, overrides) for name, overrides in spec.strategies.items()}
    shared = Shared(config, encoder, dict(backends or {}), solver, coarse)
    runs, steps = [], []
    for name, strategy in configs.items():
        results, logged = run_one(strategy, out / slug(name), shared, label=name)
        runs.append(results)
        steps.append(logged)
    reference = runs[list(configs).index(spec.reference)]
    for results in runs:
        results["reference"] = spec.reference
        results["vs_reference"] = None if results is reference else paired_comparison(results, reference)
    write_outputs(out, "comparison", runs, steps, plot=any(c.stream.plot for c in configs.values()))
    return runs
