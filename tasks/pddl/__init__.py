"""PDDL planning problems played as text games: Gripper, Blocksworld, Barman and Tyreworld (AgentBoard's four).

AgentBoard (Ma et al., 2024) turns classic planning domains into text games: the agent reads the goal and the state
in sentences, sends one action per step, and is scored by the progress rate, the share of the goal's conditions
that hold, best over the episode (AgentBoard's ``constraint_satisfaction_metric``). The AgeMem paper reports PR
(and SR) on these 60 problems: Gripper 20, Blocksworld 10, Barman 20, Tyreworld 10.

Where the games come from. Two sets play. AgentBoard's own 60 problems and domains (GPL-2.0 data, so never in
the package) play from a folder laid out as AgentBoard's ``pddlgym/pddl/`` (``<game>.pddl`` beside ``<game>/``;
``pddl.problems_dir``, ``agemem eval pddl --data DIR``); two of its Blocksworld problems cannot be won, which the
expert proves (:class:`NoPlanError`). The bundled set copies nothing: the domains
(``problems/<domain>/domain.pddl``) are our own STRIPS formulations of the textbook domains, and the problems are
made by the seeded generators below (``python -m agemem.tasks.pddl generate --out DIR`` writes them again, byte for
byte; the bundled set is ``problems/<domain>/pNN.pddl``). Sizes follow AgentBoard's problem by problem (blocks,
balls, hubs, shot glasses and cocktails per problem; goal sizes), with these differences:

* every goal condition is false at the start (AgentBoard's Blocksworld problem10 starts with one of six met);
* Gripper moves at most 8 of the (4 to 12) balls, and Tyreworld swaps at most 2 wheels per problem (AgentBoard's
  biggest ask for 12 balls or 4 swaps, 35 to 45 steps): every problem is solvable within the 30-step budget
  (the expert's plans take 2 to 28 steps);
* balls start in either room, and robby in either; Blocksworld starts and goals are random towers;
* Barman's shot glass filled from the shaker counts as used (so it can be cleaned and refilled);
* object names say what they are (``hub1``, ``nut1``, ``flat1``, ``spare1``; AgentBoard: ``the-hub1``, ``nuts1``,
  ``w1``, ``r1``).

The simulator is ours: a tiny parser for the STRIPS subset the domains use (typing and constants; no negative
preconditions, equality or conditional effects), grounding over typed objects (static preconditions pruned), and
a state that is a set of ground atoms. An action is valid when its preconditions hold and it changes the state
(AgentBoard also counts an action that changes nothing as invalid). Actions are phrased per domain, lower case
(``stack b1 on b2``, ``pick ball1 in rooma with left``; :data:`ACTION_TEXT`); a domain without a table gets the
generic ``<action> <arg1> <arg2>``. The observation is the full state in sentences (:data:`FACT_TEXT`); the
valid actions are listed (strict: a command outside the list is refused).

Metrics: ``won`` when every goal condition holds; ``progress`` the share of goal conditions that hold now (the
episode starts at 0 and keeps the best after each accepted action: AgentBoard's progress rate); no score of its
own. The expert plan comes from pyperplan's
greedy best-first search with the h_add heuristic on the same files (the optional extra ``pip install
'agemem[pddl]'``; past 1,500 states it plans the goal one condition at a time, over each rotation of their order,
and keeps the shortest; redundant actions are removed), replayed through our simulator before it is returned; the
games themselves need no package.

The package: :mod:`~agemem.tasks.pddl.simulator` (parser, grounding, text, the game),
:mod:`~agemem.tasks.pddl.expert` (the planner), :mod:`~agemem.tasks.pddl.generator` (the bundled problems); this
module is the suite: the split, the expert hook and the registration.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.tasks.base import Evaluation, Option
from agemem.tasks.games import register_suite
from agemem.tasks.pddl.expert import INSTALL_HINT, NoPlanError, PddlMissingError, plan_files, require_pddl
from agemem.tasks.pddl.generator import PROBLEMS_DIR, generate_problems, main, write_problems
from agemem.tasks.pddl.simulator import DOMAIN_FILE, DOMAINS, INVALID, PddlGame, PlanningTask, natural_key
from agemem.tasks.textgame import GameConfig, GameItem, GameRef, GameSuite, round_robin

__all__ = [
    "DOMAINS",
    "INSTALL_HINT",
    "INVALID",
    "PROBLEMS_DIR",
    "SUITE",
    "TASK_LABELS",
    "NoPlanError",
    "PddlConfig",
    "PddlGame",
    "PddlMissingError",
    "PlanningTask",
    "configured_domains",
    "describe",
    "discover",
    "expert_plan",
    "generate_problems",
    "main",
    "open_game",
    "plan_files",
    "problems_root",
    "require_pddl",
    "write_problems",
]


@dataclass
class PddlConfig(GameConfig):
    """PDDL planning problems played as text games (`agemem eval pddl`, data.source=pddl)."""

    max_env_steps: int = 30
    """environment steps per problem (AgentBoard's budget)."""
    problems_dir: str = ""
    """folder of PDDL problems, in our layout (<domain>/domain.pddl beside its problems <domain>/pNN.pddl) or in
    AgentBoard's (<game>.pddl beside a folder <game>/ of problems; games blocks, gripper, tyreworld, barman: its
    environment's pddl/ folder); empty: the bundled 60 generated problems (agemem/tasks/pddl/problems).
    pddl.task_types picks domains. `agemem eval pddl --data DIR` sets it."""


TASK_LABELS: dict[str, str] = {"gripper": "Gripper", "blocksworld": "Blocks", "barman": "Barman", "tyreworld": "Tyre"}
PROBLEM_GLOB = "p[0-9]*.pddl"
AGENTBOARD_GAMES: dict[str, str] = {
    "gripper": "gripper",
    "blocksworld": "blocks",
    "barman": "barman",
    "tyreworld": "tyreworld",
}
"""our task type -> AgentBoard's game name: its domain file ``<game>.pddl`` and problem folder ``<game>/``."""


@dataclass(frozen=True)
class DomainFiles:
    """Where one domain's files are in a problems folder."""

    domain_file: Path
    """the domain's PDDL file."""
    folder: str
    """the problems' folder, relative to the problems root (a game's ``source`` is ``<folder>/<file>``)."""
    glob: str
    """the problem files of ``folder``: ours ``pNN.pddl`` (beside domain.pddl), AgentBoard's every ``*.pddl``."""


def problems_root(settings: GameConfig) -> Path:
    """``pddl.problems_dir`` if set, else the bundled problems (also for settings that are not a PDDL section)."""
    chosen = settings.problems_dir if isinstance(settings, PddlConfig) else ""
    return Path(chosen).expanduser() if chosen else PROBLEMS_DIR


def domain_files(root: Path) -> dict[str, DomainFiles]:
    """The domains present under ``root``, in table order, in either layout (ours first where a folder has both)."""
    found: dict[str, DomainFiles] = {}
    for domain in DOMAINS:
        game = AGENTBOARD_GAMES[domain]
        if (root / domain / DOMAIN_FILE).is_file():
            found[domain] = DomainFiles(root / domain / DOMAIN_FILE, domain, PROBLEM_GLOB)
        elif (root / f"{game}.pddl").is_file() and (root / game).is_dir():
            found[domain] = DomainFiles(root / f"{game}.pddl", game, "*.pddl")
    return found


def configured_domains(settings: GameConfig) -> list[str]:
    """The domains of the problems folder, in table order: all four for the bundled problems; a folder of
    ``pddl.problems_dir`` may hold some of them (``pddl.task_types`` picks domains to play)."""
    root = problems_root(settings)
    present = list(domain_files(root))
    if not present:
        layouts = ", ".join(f"{d}/{DOMAIN_FILE}" for d in DOMAINS)
        games = ", ".join(f"{g}.pddl with {g}/" for g in AGENTBOARD_GAMES.values())
        raise ConfigError(
            f"no PDDL domain at {root}: expected our layout ({layouts}) or AgentBoard's ({games}). Set "
            "pddl.problems_dir (agemem eval pddl --data DIR) to such a folder, or leave it empty for the bundled "
            "problems (`python -m agemem.tasks.pddl generate` writes them)"
        )
    return present


def discover(settings: GameConfig) -> list[GameItem]:
    """Every problem of the folder's domains, ordered round-robin over the domains (each domain's problems in
    natural file order: problem2 before problem10): the bundled split and AgentBoard's are Gripper 20,
    Blocksworld 10, Barman 20, Tyreworld 10 (60)."""
    root = problems_root(settings)
    groups: dict[str, list[GameItem]] = {}
    for domain, files in domain_files(root).items():
        folder = root / files.folder
        problems = [path for path in folder.glob(files.glob) if path.name != DOMAIN_FILE]
        problems.sort(key=lambda path: natural_key((path.stem,)))
        if not problems:
            raise ConfigError(f"{folder} holds no problem ({files.glob})")
        groups[domain] = [
            GameItem(f"{files.folder}/{path.stem}", domain, f"{files.folder}/{path.name}") for path in problems
        ]
    return round_robin(groups, configured_domains(settings))


def game_files(game: GameRef, settings: GameConfig) -> tuple[Path, Path]:
    """``(domain file, problem file)`` of a game of the configured folder."""
    root = problems_root(settings)
    files = domain_files(root).get(game.task_type)
    if files is None:
        raise ConfigError(
            f"{root} has no {game.task_type} domain for the game {game.id}; is pddl.problems_dir the one it came from?"
        )
    return files.domain_file, root / game.source


def open_game(game: GameRef, settings: GameConfig) -> PddlGame:
    """The problem ``game.source`` (``<folder>/<problem>.pddl`` under the problems folder), not yet reset."""
    return PddlGame(*game_files(game, settings))


def describe(settings: GameConfig) -> dict[str, Any]:
    """The split's identity: its folder and a digest of its files (a regenerated or edited set is another split)."""
    digest = hashlib.sha256()
    root = problems_root(settings)
    for files in domain_files(root).values():
        paths = [files.domain_file, *(root / files.folder).glob(files.glob)]
        for path in sorted(set(paths)):
            digest.update(f"{path.relative_to(root)}\n".encode())  # ours: <domain>/<file>, as before
            digest.update(path.read_bytes())
    return {
        "problems": "bundled" if root == PROBLEMS_DIR else str(root),
        "domains": configured_domains(settings),
        "digest": digest.hexdigest()[:16],
    }


def expert_plan(game: GameRef, settings: GameConfig) -> list[str]:
    """The planner's solution from the start (a few seconds at most per problem), replayed to check that it wins;
    :class:`NoPlanError` when the goal cannot be reached (two of AgentBoard's Blocksworld problems)."""
    return plan_files(*game_files(game, settings))


SUITE = GameSuite(
    name="pddl",
    title="PDDL",
    world=(
        "You are solving planning puzzles described in text (PDDL, as in AgentBoard): moving balls between rooms "
        "with a two-gripper robot (Gripper), stacking blocks with a robot arm (Blocksworld), serving drinks with a "
        "two-handed robot barman (Barman) or changing flat tyres (Tyreworld). The first observation gives the "
        "domain's rules, your goal (facts to make true) and the current state; each later one says what your action "
        "did and the state after it. A command is one action written exactly as listed among the valid actions, "
        "such as stack b1 on b2; an action whose conditions do not hold does nothing. You win when every fact of the "
        "goal holds at the same time."
    ),
    example_command="stack b1 on b2",
    task_types=DOMAINS,
    discover=discover,
    open=open_game,
    task_labels=TASK_LABELS,
    headline="PR",
    has_progress=True,
    has_score=False,
    split_note=(
        "60 problems, Gripper 20, Blocksworld 10, Barman 20, Tyreworld 10: generated and sized like AgentBoard's, or "
        "AgentBoard's own with --data"
    ),
    describe=describe,
    settings=PddlConfig,
    expert=expert_plan,
    evaluation=Evaluation(
        "PDDL problems (Blocksworld, Gripper, Tyreworld, Barman) with the memory tools: PR and SR per domain, TC",
        "pddl.limit",
        (
            Option(
                "--data",
                "pddl.problems_dir",
                "folder of problems: AgentBoard's (blocks.pddl with blocks/, gripper.pddl with gripper/, ...) or ours "
                "(<domain>/domain.pddl with pNN.pddl); default: the bundled 60 generated problems (pddl.problems_dir)",
                metavar="DIR",
            ),
        ),
    ),
)
"""PDDL problems in our STRIPS simulator: PR (the best share of goal conditions met) per domain."""

PDDL = register_suite(SUITE)
