"""Seeded generators of the bundled problems, sized like AgentBoard's (``python -m agemem.tasks.pddl generate`` writes
them again, byte for byte)."""

from __future__ import annotations

import argparse
import itertools
import random
from collections.abc import Iterable, Sequence
from pathlib import Path

from agemem.tasks.pddl.simulator import DOMAIN_FILE, Atom, natural_key, read_pddl

PROBLEMS_DIR = Path(__file__).resolve().parent / "problems"
"""the bundled problems: ``<domain>/domain.pddl`` and ``<domain>/pNN.pddl``."""

BLOCKS_SPEC: tuple[tuple[int, int], ...] = (
    (3, 2), (3, 2), (4, 2), (4, 3), (5, 2), (5, 3), (6, 2), (6, 3), (7, 6), (7, 6),
)  # fmt: skip
"""(blocks, goal conditions) per Blocksworld problem: AgentBoard's sizes."""
GRIPPER_BALLS: tuple[int, ...] = (4, 6, 8, 10, 12, 4, 6, 6, 10, 10, 10, 4, 4, 4, 12, 12, 12, 6, 6, 12)
"""balls per Gripper problem (AgentBoard's); the goal moves between half of them and 8."""
GRIPPER_MAX_MOVED = 8
TYRE_SPEC: tuple[tuple[int, int, int], ...] = (
    (1, 1, 0), (9, 2, 0), (3, 2, 1), (4, 2, 2), (1, 1, 0), (3, 0, 3), (3, 2, 1), (3, 2, 0), (4, 2, 0), (3, 1, 2),
)  # fmt: skip
"""(hubs, hubs whose wheel the goal swaps, hubs whose spare the goal only inflates) per Tyreworld problem
(AgentBoard's hub counts; at most two swaps, so that 30 steps suffice)."""
BARMAN_SPEC: tuple[tuple[int, int, int], ...] = (
    (4, 1, 1), (4, 1, 0), (4, 1, 0), (4, 1, 0), (5, 1, 0), (5, 2, 0), (5, 2, 0), (5, 2, 0), (6, 2, 0), (6, 1, 0),
    (6, 1, 0), (6, 2, 0), (8, 1, 1), (4, 0, 1), (4, 0, 2), (5, 1, 1), (5, 0, 3), (5, 1, 1), (9, 0, 3), (9, 1, 0),
)  # fmt: skip
"""(shot glasses, cocktails to serve, ingredients to serve) per Barman problem (AgentBoard's); there are one
cocktail fewer than shot glasses, three ingredients and dispensers, one shaker, levels l0 to l2."""


def problem_text(
    name: str, domain: str, objects: Sequence[tuple[Sequence[str], str]], init: Iterable[Atom], goal: Iterable[Atom]
) -> str:
    """A problem file: typed objects, the initial atoms and the goal's conjunction."""
    lines = [f"(define (problem {name})", f"  (:domain {domain})", "  (:objects"]
    lines += [f"    {' '.join(names)} - {kind}" for names, kind in objects if names]
    lines += ["  )", "  (:init"]
    lines += [f"    ({' '.join(atom)})" for atom in init]
    lines += ["  )", "  (:goal (and"]
    lines += [f"    ({' '.join(atom)})" for atom in goal]
    lines += ["  )))", ""]
    return "\n".join(lines)


def random_towers(blocks: Sequence[str], rng: random.Random) -> list[list[str]]:
    """Blocks in random order, each on the table or on top of a random tower (bottom first)."""
    towers: list[list[str]] = []
    for block in rng.sample(list(blocks), len(blocks)):
        if towers and rng.random() < 0.6:
            rng.choice(towers).append(block)
        else:
            towers.append([block])
    return towers


def tower_atoms(towers: Sequence[Sequence[str]]) -> list[Atom]:
    atoms: list[Atom] = [("arm-empty",)]
    for tower in towers:
        atoms.append(("on-table", tower[0]))
        atoms += [("on", upper, lower) for lower, upper in itertools.pairwise(tower)]
        atoms.append(("clear", tower[-1]))
    return sorted(atoms, key=natural_key)


def blocksworld_problem(index: int, blocks: int, goal_size: int, rng: random.Random) -> str:
    """Random towers to start; the goal: ``goal_size`` of another random towers' ``on`` facts, none true yet."""
    names = [f"b{number}" for number in range(1, blocks + 1)]
    while True:
        init = tower_atoms(random_towers(names, rng))
        candidates = [atom for atom in tower_atoms(random_towers(names, rng)) if atom[0] == "on" and atom not in init]
        if len(candidates) >= goal_size:
            goal = sorted(rng.sample(candidates, goal_size), key=natural_key)
            return problem_text(f"blocksworld-p{index:02d}", "blocksworld", [(names, "block")], init, goal)


def gripper_problem(index: int, balls: int, rng: random.Random) -> str:
    """Balls and robby in random rooms; the goal moves a random half to 8 of the balls to the other room."""
    names = [f"ball{number}" for number in range(1, balls + 1)]
    rooms = ["rooma", "roomb"]
    start = {ball: rng.choice(rooms) for ball in names}
    moved = rng.sample(names, rng.randint(max(2, balls // 2), min(balls, GRIPPER_MAX_MOVED)))
    init = [("at-robby", rng.choice(rooms)), ("free", "left"), ("free", "right")]
    init += [("at", ball, room) for ball, room in start.items()]
    goal = sorted((("at", ball, rooms[1 - rooms.index(start[ball])]) for ball in moved), key=natural_key)
    objects = [(rooms, "room"), (names, "ball"), (["left", "right"], "gripper")]
    return problem_text(f"gripper-p{index:02d}", "gripper", objects, init, goal)


def tyreworld_problem(index: int, hubs: int, swaps: int, inflations: int, rng: random.Random) -> str:
    """Every hub has a flat wheel and a tight nut, every spare is in the closed boot with the tools. The goal swaps
    ``swaps`` hubs' wheels (a random mix of: the spare on the hub, the spare inflated, the flat in the boot) and
    only inflates the spares of ``inflations`` other hubs."""
    numbers = range(1, hubs + 1)
    init: list[Atom] = [("in", tool, "boot") for tool in ("wrench", "jack", "pump")]
    init += [("unlocked", "boot"), ("closed", "boot")]
    for n in numbers:
        init += [("intact", f"spare{n}"), ("in", f"spare{n}", "boot"), ("not-inflated", f"spare{n}")]
        init += [("on", f"flat{n}", f"hub{n}"), ("on-ground", f"hub{n}"), ("tight", f"nut{n}", f"hub{n}")]
        init.append(("fastened", f"hub{n}"))
    chosen = rng.sample(list(numbers), swaps + inflations)
    swap_goals = [("on",), ("in",), ("on", "in"), ("on", "inflated"), ("in", "inflated"), ("on", "inflated", "in")]
    goal: list[Atom] = []
    for n in sorted(chosen[:swaps]):
        wanted = {
            "on": ("on", f"spare{n}", f"hub{n}"),
            "inflated": ("inflated", f"spare{n}"),
            "in": ("in", f"flat{n}", "boot"),
        }
        goal += [wanted[part] for part in rng.choice(swap_goals)]
    goal += [("inflated", f"spare{n}") for n in sorted(chosen[swaps:])]
    objects = [
        (["boot"], "container"),
        ([f"hub{n}" for n in numbers], "hub"),
        ([f"nut{n}" for n in numbers], "nut"),
        ([f"{kind}{n}" for n in numbers for kind in ("flat", "spare")], "wheel"),
    ]
    return problem_text(f"tyreworld-p{index:02d}", "tyreworld", objects, init, goal)


def barman_problem(index: int, shots: int, cocktails_wanted: int, ingredients_wanted: int, rng: random.Random) -> str:
    """Clean empty glasses and shaker on the table, random two-ingredient recipes (each ordered pair once before
    any repeats); the goal fills distinct shot glasses with distinct cocktails and ingredients."""
    shot_names = [f"shot{n}" for n in range(1, shots + 1)]
    cocktails = [f"cocktail{n}" for n in range(1, shots)]
    ingredients = [f"ingredient{n}" for n in range(1, 4)]
    pairs = list(itertools.permutations(ingredients, 2))
    recipes: list[tuple[str, str]] = []
    while len(recipes) < len(cocktails):
        recipes += rng.sample(pairs, len(pairs))
    init: list[Atom] = [("ontable", "shaker1"), ("clean", "shaker1"), ("empty", "shaker1")]
    init += [atom for shot in shot_names for atom in (("ontable", shot), ("clean", shot), ("empty", shot))]
    init += [("handempty", "left"), ("handempty", "right")]
    init += [("dispenses", f"dispenser{n}", ingredient) for n, ingredient in enumerate(ingredients, 1)]
    init += [("shaker-empty-level", "shaker1", "l0"), ("shaker-level", "shaker1", "l0")]
    init += [("next", "l0", "l1"), ("next", "l1", "l2")]
    for cocktail, (first, second) in zip(cocktails, recipes):
        init += [("cocktail-part1", cocktail, first), ("cocktail-part2", cocktail, second)]
    drinks = rng.sample(cocktails, cocktails_wanted) + rng.sample(ingredients, ingredients_wanted)
    glasses = sorted(rng.sample(shot_names, len(drinks)), key=lambda name: natural_key((name,)))
    goal = [("contains", glass, drink) for glass, drink in zip(glasses, drinks)]
    objects = [
        (["shaker1"], "shaker"),
        (["left", "right"], "hand"),
        (shot_names, "shot"),
        (ingredients, "ingredient"),
        (cocktails, "cocktail"),
        ([f"dispenser{n}" for n in range(1, 4)], "dispenser"),
        (["l0", "l1", "l2"], "level"),
    ]
    return problem_text(f"barman-p{index:02d}", "barman", objects, init, goal)


def generate_problems() -> dict[str, dict[str, str]]:
    """The bundled problems, ``{domain: {file name: text}}``: one seeded generator per domain (the same files on
    every run and Python version)."""
    made: dict[str, dict[str, str]] = {}
    rng = random.Random("agemem-pddl-blocksworld")
    made["blocksworld"] = {
        f"p{i:02d}.pddl": blocksworld_problem(i, *spec, rng) for i, spec in enumerate(BLOCKS_SPEC, 1)
    }
    rng = random.Random("agemem-pddl-gripper")
    made["gripper"] = {f"p{i:02d}.pddl": gripper_problem(i, balls, rng) for i, balls in enumerate(GRIPPER_BALLS, 1)}
    rng = random.Random("agemem-pddl-tyreworld")
    made["tyreworld"] = {f"p{i:02d}.pddl": tyreworld_problem(i, *spec, rng) for i, spec in enumerate(TYRE_SPEC, 1)}
    rng = random.Random("agemem-pddl-barman")
    made["barman"] = {f"p{i:02d}.pddl": barman_problem(i, *spec, rng) for i, spec in enumerate(BARMAN_SPEC, 1)}
    return made


def write_problems(out: Path) -> list[Path]:
    """Write the generated problems under ``out/<domain>/`` with a copy of each bundled domain file."""
    written = []
    for domain, files in generate_problems().items():
        folder = out / domain
        folder.mkdir(parents=True, exist_ok=True)
        if folder.resolve() != (PROBLEMS_DIR / domain).resolve():
            (folder / DOMAIN_FILE).write_text(read_pddl(PROBLEMS_DIR / domain / DOMAIN_FILE), encoding="utf-8")
        for name, text in files.items():
            (folder / name).write_text(text, encoding="utf-8")
            written.append(folder / name)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agemem.tasks.pddl generate [--out DIR]``: write the problems (default: the bundled folder)."""
    parser = argparse.ArgumentParser(prog="python -m agemem.tasks.pddl", description=main.__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="write the generated PDDL problems")
    generate.add_argument("--out", type=Path, default=PROBLEMS_DIR, help="folder for <domain>/pNN.pddl")
    args = parser.parse_args(argv)
    written = write_problems(args.out)
    print(f"wrote {len(written)} problems under {args.out}")
    return 0
