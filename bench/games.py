"""What the text-game environments cost on this machine, replaying each game's expert plan.

For each suite (SciWorld, PDDL, BabyAI, FrozenLake, and ALFWorld when its extra is importable and games are found) a
fixed sample of its configured split (the default ``TaskRunConfig``, through :func:`agemem.tasks.games.load_games`):
the first ``--per-type`` games of every task type. Each game is planned by the suite's expert (``GameSuite.expert``),
then opened, reset and the plan replayed as :class:`~agemem.tasks.games.GameEpisode` would send it (the command
normalised; on a strict suite, one outside the listed actions is refused without a step). Measured:

* ``open`` + ``reset`` wall time per game (median, p90), warm; the suite's first open + reset is timed apart
  (SciWorld starts its JVM there, BabyAI builds its first gymnasium env);
* ``step`` wall time per command over the first ``--step-cap`` commands of each plan (AgentBoard's budget: 30);
* the expert's wall time per game (median, max; BabyAI's first game includes starting the expert's worker
  process, about 1 s, and a game whose bot outruns ``EXPERT_BUDGET_S`` is listed as having no plan) and the
  plan's length (median, max, how many exceed the cap);
* whether the replayed plan wins, played to its end (no cap): won / played;
* the peak RSS of the suite's process (``resource.getrusage``) and of its child processes (SciWorld's JVM,
  BabyAI's expert worker, read from ``/proc``), and, over the states an agent sees within the cap, the
  observation's size in characters and the number of listed actions (median): what drives prompt length.

Each suite runs in a fresh process, so its peak RSS and its first reset are its own. SciWorld's genetics topic is
left out by default (its expert plans take 20-65 s per game); ``--with-genetics`` plays it.

    OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 python bench/games.py          # 2 games per task type, ~1 min on 2 cores
    python bench/games.py --quick                                      # 1 game per task type, smoke test
    python bench/games.py --suites pddl babyai --per-type 5 --out /tmp/games.json
    python bench/games.py --with-genetics sciworld.simplifications=openDoors
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from importlib import metadata, util
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

SUITES = ("sciworld", "pddl", "babyai", "frozenlake", "alfworld")
SKIPPED_TYPES = {"sciworld": {"genetics": "expert planning takes 20-65 s per game (--with-genetics plays it)"}}
"""task types left out by default, with why."""
STEP_CAP = 30
"""AgentBoard's step budget (the suites' ``max_env_steps``): steps are timed within it."""
PACKAGES = ("scienceworld", "minigrid", "gymnasium", "pyperplan", "alfworld", "textworld")
ROOT = Path(__file__).resolve().parents[1]
BUNDLED_ALFWORLD = ROOT / "tests" / "data" / "alfworld"


# --------------------------------------------------------------------------------------------- small helpers


def percentile(values: list[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) with linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def peak_rss_mb() -> float:
    """This process's peak RSS so far (Linux reports kB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def children_peak_rss_mb() -> dict[str, float]:
    """Peak RSS (VmHWM) of every live descendant process, by ``name:pid``: the JVM is not in getrusage's SELF, and
    its CHILDREN count only children that have exited and been waited for."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])  # the name may hold spaces
    mine, found = {os.getpid()}, {}
    changed = True
    while changed:
        new = {pid for pid, parent in parents.items() if parent in mine and pid not in mine}
        mine |= new
        changed = bool(new)
    for pid in sorted(mine - {os.getpid()}):
        try:
            status = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
        except (OSError, ValueError):
            continue
        if "VmHWM" in status:
            found[f"{status['Name'].strip()}:{pid}"] = int(status["VmHWM"].split()[0]) / 1024
    return found


def timed(call: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = call()
    return result, time.perf_counter() - start


# --------------------------------------------------------------------------------------------- one suite


def sample_games(games: list[Any], task_types: tuple[str, ...], per_type: int, skipped: set[str]) -> list[Any]:
    """The first ``per_type`` games of each task type of the split (in the suite's type order), ``skipped`` types
    left out."""
    chosen = []
    for task_type in task_types:
        if task_type not in skipped:
            chosen += [game for game in games if game.task_type == task_type][:per_type]
    return chosen


def prompt_sizes(states: list[Any]) -> dict[str, list[int]]:
    """Observation characters and listed actions of each state (the prompt also carries the list, joined)."""
    return {
        "observation_chars": [len(state.observation) for state in states],
        "actions_listed": [len(state.admissible) for state in states],
        "action_list_chars": [len(", ".join(state.admissible)) for state in states],
    }


def replay(suite: Any, game: Any, settings: Any, plan: list[str], step_cap: int) -> dict[str, Any]:
    """Open, reset and play ``plan`` to its end as the episode would send it; steps and states within the cap are
    what the timing and the prompt sizes count."""
    from agemem.tasks.games import normalize_command

    world, open_s = timed(lambda: suite.open(game, settings))
    state, reset_s = timed(world.reset)
    states, step_s = [state], []
    refused, renamed, sent = [], 0, 0
    try:
        for command in plan:
            if state.won or state.over:
                break
            text = normalize_command(command)
            renamed += text != command
            sent += 1
            if suite.strict_admissible and state.admissible and text not in state.admissible:
                refused.append(text)  # the episode refuses it without a step: it still costs one
                continue
            state, seconds = timed(lambda text=text: world.step(text))
            if sent <= step_cap:
                step_s.append(seconds)
                states.append(state)
    finally:
        world.close()
    return {
        "open_reset_s": open_s + reset_s,
        "step_s": step_s,
        "commands_sent": sent,
        "won": state.won,
        "over": state.over,
        "won_within_cap": state.won and sent <= step_cap,
        "progress_at_end": state.progress,
        "renamed_by_normalize": renamed,
        "refused": refused,
        **prompt_sizes(states),
    }


def measure_game(suite: Any, game: Any, settings: Any, step_cap: int) -> dict[str, Any]:
    """One game: the expert's plan (timed), then its replay."""
    record: dict[str, Any] = {"id": game.id, "task_type": game.task_type, "source": str(game.source)}
    start = time.perf_counter()
    try:
        plan = suite.expert(game, settings)
    except Exception as err:  # a game the expert cannot solve is a finding, not the end of the run
        record["error"] = f"expert: {type(err).__name__}: {err}"
        record["expert_failed_s"] = time.perf_counter() - start  # what the failure cost the run
        return record
    record["expert_s"] = time.perf_counter() - start
    record["plan_length"] = len(plan)
    record.update(replay(suite, game, settings, plan, step_cap))
    if not record["won"]:
        record["plan"] = plan  # kept to look into
    return record


def progress(name: str, record: dict[str, Any]) -> None:
    """One line per game on stderr (a run takes minutes)."""
    shown = {key: record.get(key) for key in ("expert_s", "plan_length", "won", "error") if key in record}
    print(f"  {name} {record['id']}: {shown}", file=sys.stderr, flush=True)


def first_reset(suite: Any, game: Any, settings: Any) -> float:
    """The suite's first open + reset in this process (SciWorld: the JVM's start)."""
    world, open_s = timed(lambda: suite.open(game, settings))
    try:
        _, reset_s = timed(world.reset)
    finally:
        world.close()
    return open_s + reset_s


def summarise(records: list[dict[str, Any]], step_cap: int) -> dict[str, Any]:
    """The suite's numbers over its played games."""
    played = [r for r in records if "error" not in r]
    resets = [r["open_reset_s"] for r in played]
    steps = [s for r in played for s in r["step_s"]]
    experts = [r["expert_s"] for r in played]
    lengths = [r["plan_length"] for r in played]

    def pooled(key: str) -> float | None:
        return median([v for r in played for v in r[key]])

    return {
        "games": len(records),
        "played": len(played),
        "expert_errors": len(records) - len(played),
        "expert_failed_s": sum(r.get("expert_failed_s", 0.0) for r in records),
        "open_reset_s": {"median": median(resets), "p90": percentile(resets, 0.9)},
        "step_s": {"median": median(steps), "p90": percentile(steps, 0.9), "timed_steps": len(steps)},
        "expert_s": {"median": median(experts), "max": max(experts, default=None), "total": sum(experts)},
        "plan_length": {
            "median": median(lengths),
            "max": max(lengths, default=None),
            f"over_{step_cap}": sum(n > step_cap for n in lengths),
        },
        "won": sum(r["won"] for r in played),
        "won_within_cap": sum(r["won_within_cap"] for r in played),
        "refused_commands": sum(len(r["refused"]) for r in played),
        "renamed_by_normalize": sum(r["renamed_by_normalize"] for r in played),
        "observation_chars_median": pooled("observation_chars"),
        "first_observation_chars_median": median([r["observation_chars"][0] for r in played]),
        "actions_listed_median": pooled("actions_listed"),
        "action_list_chars_median": pooled("action_list_chars"),
    }


def measure_suite(name: str, per_type: int, step_cap: int, skipped: list[str], overrides: list[str]) -> dict[str, Any]:
    """Everything for one suite; run in a fresh process (its peak RSS and first reset are then its own)."""
    with contextlib.redirect_stdout(sys.stderr):  # minigrid prints its layout retries; stdout is the table's
        return measure_suite_here(name, per_type, step_cap, skipped, overrides)


def measure_suite_here(
    name: str, per_type: int, step_cap: int, skipped: list[str], overrides: list[str]
) -> dict[str, Any]:
    import agemem.tasks  # noqa: F401  (registers the suites)
    from agemem.core.configlib import load_config
    from agemem.tasks.config import TaskRunConfig
    from agemem.tasks.games import game_settings, get_suite, load_games

    started = time.perf_counter()
    config = load_config(TaskRunConfig, None, overrides)
    suite = get_suite(name)
    settings = game_settings(config, suite)
    split, discover_s = timed(lambda: load_games(config, suite))
    games = sample_games(split, suite.task_types, per_type, set(skipped))
    rss_before = peak_rss_mb()
    first_s = first_reset(suite, games[0], settings)
    records = []
    for game in games:
        records.append(measure_game(suite, game, settings, step_cap))
        progress(name, records[-1])
    children = children_peak_rss_mb()
    if name == "sciworld":
        from agemem.tasks.sciworld import shutdown_simulators

        shutdown_simulators()
    return {
        "suite": name,
        "title": suite.title,
        "split_size": len(split),
        "skipped_task_types": skipped,
        "sample": [game.id for game in games],
        "discover_s": discover_s,
        "first_open_reset_s": first_s,
        **summarise(records, step_cap),
        "peak_rss_mb": {"before_first_game": rss_before, "after_suite": peak_rss_mb()},
        "children_peak_rss_mb": children,
        "wall_s": time.perf_counter() - started,
        "per_game": records,
    }


# --------------------------------------------------------------------------------------------- the run


def alfworld_data(given: str) -> tuple[str, str]:
    """The ALFWorld data folder and a note on where it came from: ``--alfworld-data``, $ALFWORLD_DATA,
    ~/.cache/alfworld, else the 3 games bundled for the tests."""
    if given:
        return given, "--alfworld-data"
    if os.environ.get("ALFWORLD_DATA"):
        return os.environ["ALFWORLD_DATA"], "$ALFWORLD_DATA"
    cache = Path("~/.cache/alfworld").expanduser()
    if (cache / "json_2.1.1").is_dir():
        return str(cache), "~/.cache/alfworld"
    return str(BUNDLED_ALFWORLD), "tests/data/alfworld (3 games bundled for the tests; no downloaded games found)"


def alfworld_missing() -> str | None:
    """Why ALFWorld is skipped, or None when its extra imports."""
    missing = [name for name in ("alfworld", "textworld") if util.find_spec(name) is None]
    return f"skipped: {', '.join(missing)} not importable (pip install 'agemem[alfworld]')" if missing else None


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = None
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
        found["java"] = (java.stderr or java.stdout).splitlines()[0]
    except (OSError, IndexError):
        found["java"] = None
    return found


def machine() -> dict[str, Any]:
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True, check=False)
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": commit.stdout.strip(),
        "env": {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "HF_HUB_OFFLINE")},
    }


def run_suite(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """``measure_suite`` in a fresh spawned process (a forked one would inherit this one's RSS and imports)."""
    skipped = [] if args.with_genetics else list(SKIPPED_TYPES.get(name, {}))
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        return pool.submit(measure_suite, name, args.per_type, args.step_cap, skipped, args.overrides).result()


def ms(value: float | None) -> str:
    return "-" if value is None else f"{1000 * value:.1f}"


def number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def print_table(results: dict[str, dict[str, Any]], notes: dict[str, str], args: argparse.Namespace) -> None:
    title = (
        f"Text games on this machine: first {args.per_type} game(s) per task type, expert plans replayed "
        f"(steps timed within {args.step_cap}; wins checked without a cap)"
    )
    table = Table(title=title)
    columns = (
        "suite", "games", "1st reset s", "reset ms med/p90", "step ms med/p90", "expert s med/max", "plan len med/max",
        f">{args.step_cap}", "no plan", "won/played", "peak RSS MB py/child", "obs chars", "actions",
    )  # fmt: skip
    for column in columns:
        table.add_column(column, justify="left" if column == "suite" else "right", no_wrap=True)
    for row in results.values():
        reset, step, expert, plan = row["open_reset_s"], row["step_s"], row["expert_s"], row["plan_length"]
        child = sum(row["children_peak_rss_mb"].values())
        table.add_row(
            row["title"],
            f"{row['games']}",
            f"{row['first_open_reset_s']:.3f}",
            f"{ms(reset['median'])} / {ms(reset['p90'])}",
            f"{ms(step['median'])} / {ms(step['p90'])}",
            f"{number(expert['median'], 2)} / {number(expert['max'], 2)}",
            f"{number(plan['median'], 1)} / {number(plan['max'])}",
            f"{plan[f'over_{args.step_cap}']}",
            f"{row['expert_errors']}",
            f"{row['won']}/{row['played']}",
            f"{row['peak_rss_mb']['after_suite']:.0f} / {child:.0f}",
            number(row["observation_chars_median"]),
            number(row["actions_listed_median"], 1),
        )
    console = Console() if Console().is_terminal else Console(width=200)  # piped: do not squeeze the table
    console.print(table)
    for name, note in notes.items():
        console.print(f"{name}: {note}", highlight=False)
    for line in failures(results):
        console.print(line, highlight=False)


def failures(results: dict[str, dict[str, Any]]) -> list[str]:
    """One line per game whose expert found no plan or whose plan did not win on replay."""
    lines = []
    for name, row in results.items():
        for game in row["per_game"]:
            if "error" in game:
                lines.append(f"{name} {game['id']}: no expert plan ({game['error']})")
            elif not game["won"]:
                ending = "lost" if game["over"] else f"not won, progress {game['progress_at_end']:.2f}"
                lines.append(f"{name} {game['id']}: the {game['plan_length']}-command plan replayed: {ending}")
    return lines


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", nargs="+", default=list(SUITES), choices=SUITES)
    parser.add_argument("--per-type", type=int, default=2, help="games per task type (the first of the split)")
    parser.add_argument("--step-cap", type=int, default=STEP_CAP, help="steps timed per game (AgentBoard: 30)")
    parser.add_argument("--with-genetics", action="store_true", help="also play SciWorld's genetics topic")
    parser.add_argument("--alfworld-data", default="", help="ALFWorld data folder (default: see alfworld_data)")
    parser.add_argument("--quick", action="store_true", help="smoke test: 1 game per task type")
    parser.add_argument("--out", default="bench/results/games_cpu.json")
    parser.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides (TaskRunConfig)")
    args = parser.parse_args()
    if args.quick:
        args.per_type = 1
    return args


def main() -> None:
    args = parse_args()
    notes: dict[str, str] = {}
    if "alfworld" in args.suites:
        missing = alfworld_missing()
        if missing:
            notes["alfworld"] = missing
            args.suites.remove("alfworld")
        else:
            folder, origin = alfworld_data(args.alfworld_data)
            args.overrides.append(f"alfworld.data_dir={folder}")
            notes["alfworld"] = f"games from {origin}"
    if "sciworld" in args.suites and not args.with_genetics:
        notes["sciworld"] = f"genetics skipped: {SKIPPED_TYPES['sciworld']['genetics']}"

    results: dict[str, dict[str, Any]] = {}
    for name in args.suites:
        print(f"{name} ...", file=sys.stderr, flush=True)
        try:
            results[name] = run_suite(name, args)
        except Exception as err:  # a suite whose extra or data is missing is noted, the others still run
            notes[name] = f"skipped: {type(err).__name__}: {err}"
    print_table(results, notes, args)

    report = {
        "what": "text-game environment cost per suite on the expert's plans: open+reset, step and expert wall "
        "times, plan lengths, wins on replay, peak RSS, prompt-driving sizes",
        "command": shlex.join(["python", "bench/games.py", *sys.argv[1:]]),
        "machine": machine(),
        "versions": versions(),
        "per_type": args.per_type,
        "step_cap": args.step_cap,
        "skipped_task_types": {} if args.with_genetics else SKIPPED_TYPES,
        "notes": notes,
        "failures": failures(results),
        "config_overrides": args.overrides,
        "results": results,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
