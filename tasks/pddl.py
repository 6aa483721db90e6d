"""PDDL planning problems played as text games: Gripper, Blocksworld, Barman and Tyreworld (AgentBoard's four).

AgentBoard (Ma et al., 2024) turns classic planning domains into text games: the agent reads the goal and the state
in sentences, sends one action per step, and is scored by the progress rate, the share of the goal's conditions
that hold, best over the episode (AgentBoard's ``constraint_satisfaction_metric``). The AgeMem paper reports PR
(and SR) on these 60 problems: Gripper 20, Blocksworld 10, Barman 20, Tyreworld 10.

Where the games come from. AgentBoard's problem files are not on the package index, and we copy nothing: the
domains (``pddl_problems/<domain>/domain.pddl``) are our own STRIPS formulations of the textbook domains, and the
problems are made by the seeded generators below (``python -m agemem.tasks.pddl generate --out DIR`` writes them
again, byte for byte; the bundled set is ``pddl_problems/<domain>/pNN.pddl``). Sizes follow AgentBoard's problem
by problem (blocks, balls, hubs, shot glasses and cocktails per problem; goal sizes), with these differences:

* every goal condition is false at the start (AgentBoard's Gripper goals also list balls already in place), so a
  game starts at progress 0 and PR measures what the agent did;
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
episode keeps the best: AgentBoard's progress rate); no score of its own. The expert plan comes from pyperplan's
greedy best-first search with the h_add heuristic on the same files (the optional extra ``pip install
'agemem[pddl]'``; past 1,500 states it plans the goal one condition at a time, over each rotation of their order,
and keeps the shortest; redundant actions are removed), replayed through our simulator before it is returned; the
games themselves need no package.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import random
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.tasks.config import GameConfig, PddlConfig
from agemem.tasks.games import register_suite
from agemem.tasks.textgame import GameItem, GameRef, GameState, GameSuite, round_robin

Atom = tuple[str, ...]
"""a ground atom: the predicate, then its arguments (``("on", "b1", "b2")``)."""

DOMAINS: tuple[str, ...] = ("gripper", "blocksworld", "barman", "tyreworld")
"""the four domains, in AgentBoard's order (``game_name: [gripper, blockworld, barman, tyreworld]``)."""
TASK_LABELS: dict[str, str] = {"gripper": "Gripper", "blocksworld": "Blocks", "barman": "Barman", "tyreworld": "Tyre"}
PROBLEMS_DIR = Path(__file__).resolve().parent / "pddl_problems"
"""the bundled problems: ``<domain>/domain.pddl`` and ``<domain>/pNN.pddl``."""
DOMAIN_FILE = "domain.pddl"
PROBLEM_GLOB = "p[0-9]*.pddl"
INSTALL_HINT = "the PDDL expert planner needs the optional extra: pip install 'agemem[pddl]' (pyperplan)"
INVALID = "The action is not valid and therefore takes no effect"


class PddlMissingError(ConfigError):
    """pyperplan (the expert's planner) is missing; the message says how to install it."""


# --------------------------------------------------------------------------------------------- parsing


@dataclass(frozen=True)
class Schema:
    """An action of a domain, before grounding."""

    name: str
    parameters: tuple[tuple[str, str], ...]
    """``(variable, type)`` pairs, variables with their ``?``."""
    precondition: tuple[Atom, ...]
    add: tuple[Atom, ...]
    delete: tuple[Atom, ...]


@dataclass(frozen=True)
class Domain:
    name: str
    parents: dict[str, str]
    """each declared type's parent type (``object`` at the top)."""
    constants: dict[str, str]
    """constant -> type."""
    predicates: tuple[str, ...]
    actions: tuple[Schema, ...]


@dataclass(frozen=True)
class Problem:
    name: str
    domain: str
    objects: dict[str, str]
    """object -> type."""
    init: frozenset[Atom]
    goal: tuple[Atom, ...]


def parse_sexpr(text: str, source: str) -> list[Any]:
    """The one top-level list of a PDDL file as nested Python lists of lower-case symbols (comments dropped)."""
    tokens = re.findall(r"[()]|[^\s()]+", re.sub(r";[^\n]*", "", text).lower())
    stack: list[list[Any]] = [[]]
    for token in tokens:
        if token == "(":
            stack.append([])
        elif token == ")":
            if len(stack) == 1:
                raise ConfigError(f"{source}: unbalanced ')'")
            closed = stack.pop()
            stack[-1].append(closed)
        else:
            stack[-1].append(token)
    if len(stack) != 1 or len(stack[0]) != 1 or not isinstance(stack[0][0], list):
        raise ConfigError(f"{source}: expected one (define ...) form")
    return stack[0][0]


def typed_names(items: Sequence[str]) -> list[tuple[str, str]]:
    """``a b - t c`` -> ``[(a, t), (b, t), (c, object)]`` (PDDL's typed lists)."""
    typed: list[tuple[str, str]] = []
    pending: list[str] = []
    index = 0
    while index < len(items):
        if items[index] == "-":
            typed.extend((name, items[index + 1]) for name in pending)
            pending = []
            index += 2
        else:
            pending.append(items[index])
            index += 1
    return typed + [(name, "object") for name in pending]


def conjunction(formula: Any, source: str, *, negations: bool) -> tuple[list[Atom], list[Atom]]:
    """The positive and negated atoms of ``(and ...)`` or of one literal; anything else is outside the subset."""
    literals = formula[1:] if formula and formula[0] == "and" else [formula]
    positive: list[Atom] = []
    negative: list[Atom] = []
    for literal in literals:
        if literal and literal[0] == "not" and negations and isinstance(literal[1], list):
            negative.append(tuple(literal[1]))
        elif literal and all(isinstance(term, str) for term in literal) and literal[0] not in ("not", "or", "="):
            positive.append(tuple(literal))
        else:
            raise ConfigError(f"{source}: {literal} is outside the STRIPS subset (typed atoms, negated effects)")
    return positive, negative


def sections(form: list[Any]) -> dict[str, list[Any]]:
    """The ``(:keyword ...)`` parts of a ``define`` form, by keyword."""
    return {part[0]: part for part in form[2:] if isinstance(part, list) and part and part[0].startswith(":")}


def parse_domain(text: str, source: str = "domain") -> Domain:
    form = parse_sexpr(text, source)
    if form[:1] != ["define"] or len(form) < 2 or form[1][:1] != ["domain"]:
        raise ConfigError(f"{source}: not a (define (domain ...)) file")
    parts = sections(form)
    parents = {name: parent for name, parent in typed_names(parts.get(":types", [""])[1:])}
    for parent in list(parents.values()):
        parents.setdefault(parent, "object")  # a parent used but not declared hangs under object
    parents.pop("object", None)
    constants = dict(typed_names(parts.get(":constants", [""])[1:]))
    predicates = tuple(predicate[0] for predicate in parts.get(":predicates", [""])[1:])
    actions = []
    for part in form[2:]:
        if isinstance(part, list) and part[:1] == [":action"]:
            fields = dict(zip(part[2::2], part[3::2]))
            precondition, _ = conjunction(fields.get(":precondition", ["and"]), source, negations=False)
            add, delete = conjunction(fields.get(":effect", ["and"]), source, negations=True)
            parameters = tuple(typed_names(fields.get(":parameters", [])))
            actions.append(Schema(part[1], parameters, tuple(precondition), tuple(add), tuple(delete)))
    return Domain(form[1][1], parents, constants, predicates, tuple(actions))


def parse_problem(text: str, source: str = "problem") -> Problem:
    form = parse_sexpr(text, source)
    if form[:1] != ["define"] or len(form) < 2 or form[1][:1] != ["problem"]:
        raise ConfigError(f"{source}: not a (define (problem ...)) file")
    parts = sections(form)
    init, _ = conjunction(["and", *parts.get(":init", [""])[1:]], source, negations=False)
    goal, _ = conjunction(parts.get(":goal", ["", ["and"]])[1], source, negations=False)
    objects = dict(typed_names(parts.get(":objects", [""])[1:]))
    return Problem(form[1][1], parts.get(":domain", ["", ""])[1], objects, frozenset(init), tuple(goal))


# --------------------------------------------------------------------------------------------- grounding


@dataclass(frozen=True)
class GroundAction:
    name: str
    args: tuple[str, ...]
    precondition: tuple[Atom, ...]
    """the preconditions that can change (static ones were checked at grounding), in the domain's order."""
    add: frozenset[Atom]
    delete: frozenset[Atom]


def static_predicates(domain: Domain) -> set[str]:
    """The predicates no action adds or deletes: their atoms are the problem's fixed facts."""
    changed = {atom[0] for schema in domain.actions for atom in (*schema.add, *schema.delete)}
    return set(domain.predicates) - changed


def objects_by_type(domain: Domain, problem: Problem) -> dict[str, list[str]]:
    """Each type's objects and constants, its subtypes' included (``object`` holds all)."""
    members: dict[str, list[str]] = {}
    for name, kind in {**domain.constants, **problem.objects}.items():
        while True:
            members.setdefault(kind, []).append(name)
            if kind == "object":
                break
            kind = domain.parents.get(kind, "object")
    return members


def ground_actions(domain: Domain, problem: Problem) -> list[GroundAction]:
    """Every ground action whose static preconditions hold in the initial state (the others never apply)."""
    statics = static_predicates(domain)
    members = objects_by_type(domain, problem)
    grounded = []
    for schema in domain.actions:
        variables = [variable for variable, _ in schema.parameters]
        for values in itertools.product(*(members.get(kind, []) for _, kind in schema.parameters)):
            binding = dict(zip(variables, values))

            def bind(atom: Atom, binding: dict[str, str] = binding) -> Atom:
                return (atom[0], *(binding.get(term, term) for term in atom[1:]))

            precondition = [bind(atom) for atom in schema.precondition]
            if any(atom[0] in statics and atom not in problem.init for atom in precondition):
                continue
            dynamic = tuple(atom for atom in precondition if atom[0] not in statics)
            add = frozenset(bind(atom) for atom in schema.add)
            delete = frozenset(bind(atom) for atom in schema.delete)
            grounded.append(GroundAction(schema.name, tuple(values), dynamic, add, delete))
    return grounded


def successor(state: frozenset[Atom], action: GroundAction) -> frozenset[Atom]:
    """The state after ``action`` (deletes first, then adds: PDDL's order)."""
    return (state - action.delete) | action.add


def goal_share(state: frozenset[Atom], goal: Sequence[Atom]) -> float:
    """The share of goal conditions that hold in ``state`` (AgentBoard's progress rate, before the best-of)."""
    return sum(atom in state for atom in goal) / len(goal) if goal else 1.0


# --------------------------------------------------------------------------------------------- text

ACTION_TEXT: dict[str, dict[str, str]] = {
    "blocksworld": {
        "pick-up": "pick up {0}",
        "put-down": "put down {0}",
        "stack": "stack {0} on {1}",
        "unstack": "unstack {0} from {1}",
    },
    "gripper": {
        "move": "move from {0} to {1}",
        "pick": "pick {0} in {1} with {2}",
        "drop": "drop {0} in {1} with {2}",
    },
    "tyreworld": {
        "open": "open {0}",
        "close": "close {0}",
        "fetch": "fetch {0} from {1}",
        "put-away": "put away {0} in {1}",
        "loosen": "loosen {0} on {1}",
        "tighten": "tighten {0} on {1}",
        "jack-up": "jack up {0}",
        "jack-down": "jack down {0}",
        "undo": "undo {0} on {1}",
        "do-up": "do up {0} on {1}",
        "remove-wheel": "remove {0} from {1}",
        "put-on-wheel": "put {0} on {1}",
        "inflate": "inflate {0}",
    },
    "barman": {
        "grasp": "grasp {1} with {0}",
        "leave": "leave {1} from {0}",
        "fill-shot": "fill {0} with {1} from {4} using {2} and {3}",
        "refill-shot": "refill {0} with {1} from {4} using {2} and {3}",
        "empty-shot": "empty {1} of {2} using {0}",
        "clean-shot": "clean {0} of {1} using {2} and {3}",
        "pour-shot-to-clean-shaker": "pour {1} from {0} into clean {2} using {3} from {4} to {5}",
        "pour-shot-to-used-shaker": "pour {1} from {0} into used {2} using {3} from {4} to {5}",
        "empty-shaker": "empty {1} of {2} using {0} from {3} to {4}",
        "clean-shaker": "clean {2} using {0} and {1}",
        "shake": "shake {0} from {1} and {2} in {3} using {4} and {5}",
        "pour-shaker-to-shot": "pour {0} from {3} into {1} using {2} from {4} to {5}",
    },
}
"""each domain's actions as commands (every argument named, so that a command is one ground action)."""

FACT_TEXT: dict[str, dict[str, str]] = {
    "blocksworld": {
        "on": "{0} is on {1}",
        "on-table": "{0} is on the table",
        "clear": "{0} is clear",
        "arm-empty": "the arm is empty",
        "holding": "the arm is holding {0}",
    },
    "gripper": {
        "at-robby": "robby is in {0}",
        "at": "{0} is in {1}",
        "free": "gripper {0} is free",
        "carry": "gripper {1} is carrying {0}",
    },
    "tyreworld": {
        "isopen": "{0} is open",
        "closed": "{0} is closed",
        "unlocked": "{0} is unlocked",
        "have": "you have {0}",
        "in": "{0} is in {1}",
        "loose": "{0} is loose on {1}",
        "tight": "{0} is tight on {1}",
        "on-ground": "{0} is on the ground",
        "not-on-ground": "{0} is jacked up",
        "fastened": "{0} is fastened",
        "unfastened": "{0} is unfastened",
        "free": "{0} has no wheel",
        "on": "{0} is on {1}",
        "inflated": "{0} is inflated",
        "not-inflated": "{0} is not inflated",
        "intact": "{0} is intact",
    },
    "barman": {
        "ontable": "{0} is on the table",
        "holding": "the {0} hand is holding {1}",
        "handempty": "the {0} hand is empty",
        "empty": "{0} is empty",
        "contains": "{0} contains {1}",
        "clean": "{0} is clean",
        "used": "{0} has been used for {1}",
        "dispenses": "{0} dispenses {1}",
        "shaker-empty-level": "the empty level of {0} is {1}",
        "shaker-level": "{0} is at level {1}",
        "next": "level {1} is one above level {0}",
        "unshaked": "{0} is not shaken",
        "shaked": "{0} is shaken",
        "cocktail-part1": "the first ingredient of {0} is {1}",
        "cocktail-part2": "the second ingredient of {0} is {1}",
    },
}
"""each domain's facts as sentences (without the full stop)."""

RULES: dict[str, str] = {
    "blocksworld": (
        "Blocksworld: blocks stand on the table or on each other; an arm moves one block at a time. You can pick up "
        "a clear block from the table and unstack a clear block from another block, both only with an empty arm; "
        "you can put down the block you hold on the table, or stack it on a clear block."
    ),
    "gripper": (
        "Gripper: robby, a robot with two grippers (left and right), carries balls between rooms. It can move from "
        "room to room, pick a ball in its room with a free gripper, and drop a carried ball in its room."
    ),
    "tyreworld": (
        "Tyreworld: replace flat wheels with the spare wheels from the boot. Open the boot to fetch or put away "
        "things (the wrench, the jack, the pump, wheels, nuts). With the wrench, loosen or tighten a hub's nut while "
        "the hub is on the ground. With the jack, jack up a hub (the jack stays under it until you jack it down). "
        "On a jacked-up hub, with the wrench: undo a loose nut (you then hold it; the hub is unfastened) or do it up "
        "again; remove the wheel of an unfastened hub, or put a wheel you hold on an unfastened hub with no wheel. "
        "With the pump, inflate an intact wheel."
    ),
    "barman": (
        "Barman: a robot with two hands (left and right) serves drinks in shot glasses. A hand can grasp a glass or "
        "the shaker from the table and leave it there. Holding a shot glass with the other hand empty, fill it with an "
        "ingredient from a dispenser if it is clean (refill if it held that ingredient before), clean it once empty, "
        "or empty it. Pour an ingredient from a held shot glass into the shaker (clean and empty: into clean; "
        "holding an unshaken ingredient: into used); each pour raises its level. Holding the shaker with the other "
        "hand empty, shake the two ingredients of a cocktail (its first and second ingredient) into the cocktail; "
        "pour a shaken cocktail into a clean empty shot glass on the table (the level drops), empty the shaker, or "
        "clean it once empty."
    ),
}
"""each domain's rules, shown in the first observation (what the actions need and do)."""


def action_text(domain: str, name: str, args: Sequence[str]) -> str:
    """A ground action as a command: the domain's phrase, else ``<action> <arg1> <arg2> ...``."""
    template = ACTION_TEXT.get(domain, {}).get(name)
    return template.format(*args) if template else " ".join((name, *args))


def fact_text(domain: str, atom: Atom) -> str:
    """A ground atom as a sentence without its full stop (the domain's phrase, else ``<predicate> <args>``)."""
    template = FACT_TEXT.get(domain, {}).get(atom[0])
    return template.format(*atom[1:]) if template else " ".join(atom)


def natural_key(atom: Atom) -> tuple[Any, ...]:
    """Sort key that puts ``b2`` before ``b10``."""
    return tuple(tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", term)) for term in atom)


def sentences(domain: str, atoms: Iterable[Atom]) -> str:
    """Facts as sentences, grouped by predicate and in natural order."""
    texts = [fact_text(domain, atom) for atom in sorted(atoms, key=natural_key)]
    return " ".join(text + "." for text in texts)  # object names keep their case: the agent types them


def normalize(command: str) -> str:
    """Lower case, single spaces (as the episode sends it)."""
    return " ".join(command.lower().split())


# --------------------------------------------------------------------------------------------- the game


@lru_cache(maxsize=32)
def _domain_of(path: str, text: str) -> Domain:
    return parse_domain(text, path)


class PlanningTask:
    """A problem of a domain, grounded: the actions by their command, the initial state, the goal."""

    def __init__(self, domain_file: Path, problem_file: Path):
        self.domain = _domain_of(str(domain_file), _read(domain_file))
        self.problem = parse_problem(_read(problem_file), str(problem_file))
        if self.problem.domain != self.domain.name:
            raise ConfigError(
                f"{problem_file} is a {self.problem.domain!r} problem, {domain_file} is {self.domain.name!r}"
            )
        self.statics = static_predicates(self.domain)
        self.by_command: dict[str, GroundAction] = {}
        self.by_name: dict[Atom, GroundAction] = {}
        for action in ground_actions(self.domain, self.problem):
            command = action_text(self.domain.name, action.name, action.args)
            if command in self.by_command:  # a phrase that leaves out an argument: a bug in ACTION_TEXT
                raise ConfigError(f"{domain_file}: two actions read {command!r}")
            self.by_command[command] = action
            self.by_name[(action.name, *action.args)] = action

    def command(self, action: GroundAction) -> str:
        return action_text(self.domain.name, action.name, action.args)

    def applicable(self, state: frozenset[Atom]) -> list[GroundAction]:
        """The actions whose preconditions hold and that change the state."""
        return [
            action
            for action in self.by_command.values()
            if all(atom in state for atom in action.precondition) and successor(state, action) != state
        ]

    def goal_text(self) -> str:
        return "; ".join(fact_text(self.domain.name, atom) for atom in self.problem.goal)


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read the PDDL file {path} ({err})") from err


class PddlGame:
    """One PDDL problem as a text game (:class:`~agemem.tasks.textgame.TextGame`): ``reset()``, then ``step(command)``
    with one of the listed actions until ``won``. ``progress`` is the share of goal conditions that hold now."""

    def __init__(self, domain_file: Path, problem_file: Path):
        self.task = PlanningTask(domain_file, problem_file)
        self._state: frozenset[Atom] | None = None

    @property
    def state(self) -> frozenset[Atom]:
        if self._state is None:
            raise RuntimeError("PddlGame used before reset()")
        return self._state

    def reset(self) -> GameState:
        self._state = self.task.problem.init
        domain = self.task.domain.name
        fixed = [atom for atom in self._state if atom[0] in self.task.statics]
        parts = [RULES.get(domain, f"Planning domain {domain}."), f"Goal: {self.goal()}."]
        if fixed:
            parts.append(f"Facts that never change: {sentences(domain, fixed)}")
        parts.append(f"Current state: {self._state_text()}")
        return self._game_state("\n".join(parts), valid=True)

    def step(self, command: str) -> GameState:
        """Apply one action; a command that names no action, or an action whose conditions fail or that would change
        nothing, leaves the state as it was (``valid=False``, the observation says why)."""
        state = self.state
        wanted = normalize(command)
        action = self.task.by_command.get(wanted)
        if action is None:
            return self._game_state(f"{INVALID}: {wanted!r} is not an action of this game.", valid=False)
        unmet = [atom for atom in action.precondition if atom not in state]
        if unmet:
            reason = fact_text(self.task.domain.name, unmet[0])
            return self._game_state(f"{INVALID}: {wanted} needs that {reason}.", valid=False)
        after = successor(state, action)
        if after == state:
            return self._game_state(f"{INVALID}: {wanted} would change nothing.", valid=False)
        self._state = after
        observation = f"You {wanted}. Current state: {self._state_text()}"
        if self._won():
            observation += " The goal is satisfied."
        return self._game_state(observation, valid=True)

    def close(self) -> None:
        self._state = None

    def goal(self) -> str:
        return f"make these facts true: {self.task.goal_text()}"

    def _won(self) -> bool:
        return all(atom in self.state for atom in self.task.problem.goal)

    def _state_text(self) -> str:
        return sentences(self.task.domain.name, (atom for atom in self.state if atom[0] not in self.task.statics))

    def _game_state(self, observation: str, *, valid: bool) -> GameState:
        won = self._won()
        admissible = sorted(self.task.command(action) for action in self.task.applicable(self.state))
        return GameState(
            observation=observation,
            admissible=admissible,
            won=won,
            progress=goal_share(self.state, self.task.problem.goal),
            over=not won and not admissible,  # nothing can be done any more
            valid=valid,
            goal=self.goal(),
        )

    def __enter__(self) -> PddlGame:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --------------------------------------------------------------------------------------------- the split


def problems_root(settings: GameConfig) -> Path:
    """``pddl.problems_dir`` if set, else the bundled problems (also for settings that are not a PDDL section)."""
    chosen = settings.problems_dir if isinstance(settings, PddlConfig) else ""
    return Path(chosen).expanduser() if chosen else PROBLEMS_DIR


def configured_domains(settings: GameConfig) -> list[str]:
    """The domains of the problems folder, in table order: all four for the bundled problems; a folder of
    ``pddl.problems_dir`` may hold some of them (``pddl.task_types`` picks domains to play)."""
    root = problems_root(settings)
    present = [domain for domain in DOMAINS if (root / domain / DOMAIN_FILE).is_file()]
    if not present:
        raise ConfigError(
            f"no PDDL domain at {root} (<domain>/{DOMAIN_FILE} for one of {', '.join(DOMAINS)}); set "
            "pddl.problems_dir to such a folder, or leave it empty for the bundled problems "
            "(`python -m agemem.tasks.pddl generate` writes them)"
        )
    return present


def discover(settings: GameConfig) -> list[GameItem]:
    """Every problem of the folder's domains, ordered round-robin over the domains (each domain's problems in file
    order): the bundled split is Gripper 20, Blocksworld 10, Barman 20, Tyreworld 10 (60, as AgentBoard)."""
    root = problems_root(settings)
    domains = configured_domains(settings)
    groups: dict[str, list[GameItem]] = {}
    for domain in domains:
        folder = root / domain
        problems = sorted(folder.glob(PROBLEM_GLOB), key=lambda path: natural_key((path.stem,)))
        if not problems:
            raise ConfigError(f"{folder} holds no problem ({PROBLEM_GLOB})")
        groups[domain] = [GameItem(f"{domain}/{path.stem}", domain, f"{domain}/{path.name}") for path in problems]
    return round_robin(groups, domains)


def open_game(game: GameRef, settings: GameConfig) -> PddlGame:
    """The problem ``game.source`` (``<domain>/<problem>.pddl`` under the problems folder), not yet reset."""
    problem_file = problems_root(settings) / game.source
    return PddlGame(problem_file.parent / DOMAIN_FILE, problem_file)


def describe(settings: GameConfig) -> dict[str, Any]:
    """The split's identity: its folder and a digest of its files (a regenerated or edited set is another split)."""
    digest = hashlib.sha256()
    root = problems_root(settings)
    for domain in configured_domains(settings):
        for path in sorted((root / domain).glob("*.pddl")):
            digest.update(f"{domain}/{path.name}\n".encode())
            digest.update(path.read_bytes())
    return {
        "problems": "bundled" if root == PROBLEMS_DIR else str(root),
        "domains": configured_domains(settings),
        "digest": digest.hexdigest()[:16],
    }


# --------------------------------------------------------------------------------------------- the expert


SEARCH_BUDGET = 1500
"""heuristic evaluations a search may spend before the expert plans the goal one condition at a time (pyperplan's
search over two Barman cocktails at once takes minutes; one at a time, a fraction of a second)."""


class _BudgetSpentError(Exception):
    """The search evaluated :data:`SEARCH_BUDGET` states without reaching the goal."""


def require_pddl() -> dict[str, Any]:
    """pyperplan's parser, grounding, task, search and heuristic; :class:`PddlMissingError` when it is missing."""
    try:
        from pyperplan import grounding, search
        from pyperplan.heuristics.relaxation import hAddHeuristic
        from pyperplan.pddl.parser import Parser
        from pyperplan.task import Task
    except ImportError as err:
        raise PddlMissingError(f"{INSTALL_HINT} ({type(err).__name__}: {err})") from err
    return {
        "Parser": Parser,
        "ground": grounding.ground,
        "Task": Task,
        "search": search.greedy_best_first_search,  # with h_add: the fastest of pyperplan's on these domains
        "heuristic": hAddHeuristic,
    }


def fact_name(atom: Atom) -> str:
    """An atom as pyperplan names a fact: ``(on b1 b2)``."""
    return f"({' '.join(atom)})"


def budgeted_search(parts: dict[str, Any], task: Any) -> list[Atom] | None:
    """pyperplan's plan for ``task`` as ``(action, *args)`` tuples; None when the search budget ran out."""
    heuristic = parts["heuristic"](task)
    evaluations = 0

    def evaluate(node: Any) -> float:
        nonlocal evaluations
        evaluations += 1
        if evaluations > SEARCH_BUDGET:
            raise _BudgetSpentError
        return heuristic(node)

    try:
        solution = parts["search"](task, evaluate)
    except _BudgetSpentError:
        return None
    if solution is None:
        raise RuntimeError(f"pyperplan proved {task.name} unsolvable")
    return [tuple(op.name.strip("()").split()) for op in solution]


def without_detours(task: PlanningTask, steps: list[Atom]) -> list[Atom]:
    """Greedy action elimination: drop an action, and the later ones it enabled, whenever the rest still reaches
    the goal (removes the planner's detours, such as picking a block up only to put it back)."""
    goal = set(task.problem.goal)
    index = 0
    while index < len(steps):
        state, kept = task.problem.init, []
        for position, step in enumerate(steps):
            action = task.by_name[step]
            if position == index or not all(atom in state for atom in action.precondition):
                continue
            state = successor(state, action)
            kept.append(step)
        if goal <= state:
            steps = kept
        else:
            index += 1
    return steps


def serial_plan(parts: dict[str, Any], task: Any, planning: PlanningTask, goal: Sequence[Atom]) -> list[Atom]:
    """A plan that reaches ``goal[:1]``, then ``goal[:2]`` from there, and so on (each search is small)."""
    steps: list[Atom] = []
    state = planning.problem.init
    for count in range(1, len(goal) + 1):
        start = frozenset(fact_name(atom) for atom in state) & task.facts
        wanted = frozenset(fact_name(atom) for atom in goal[:count])
        stage = budgeted_search(parts, parts["Task"](task.name, task.facts, start, wanted, task.operators))
        if stage is None:
            raise RuntimeError(f"pyperplan found no plan for {task.name} within {SEARCH_BUDGET} states")
        for step in stage:
            state = successor(state, planning.by_name[step])
        steps += stage
    return steps


def plan_files(domain_file: Path, problem_file: Path) -> list[str]:
    """A plan from pyperplan (greedy best-first search, h_add) as our commands, checked by playing it through
    :class:`PddlGame`: it must win. When one search over the whole goal runs out of budget, the goal's conditions
    are added one at a time, each search starting where the last plan ended."""
    parts = require_pddl()
    parser = parts["Parser"](str(domain_file), str(problem_file))
    task = parts["ground"](parser.parse_problem(parser.parse_domain()))
    game = PddlGame(domain_file, problem_file)
    goal = game.task.problem.goal
    if not task.initial_state <= {fact_name(atom) for atom in game.task.problem.init}:
        raise RuntimeError(f"pyperplan names the facts of {problem_file} otherwise than {fact_name(goal[0])}")
    steps = budgeted_search(parts, task)
    if steps is None:  # the goal's conditions one at a time, in each rotation of their order: the shortest plan
        plans = [serial_plan(parts, task, game.task, goal[turn:] + goal[:turn]) for turn in range(len(goal))]
        steps = min((without_detours(game.task, plan) for plan in plans), key=len)
    steps = without_detours(game.task, steps)
    commands = [game.task.command(game.task.by_name[step]) for step in steps]
    played = game.reset()
    for command in commands:
        played = game.step(command)
        if not played.valid:
            raise RuntimeError(f"pyperplan's plan for {problem_file} fails in the simulator at {command!r}")
    if not played.won:
        raise RuntimeError(f"pyperplan's plan for {problem_file} does not reach the goal in the simulator")
    return commands


def expert_plan(game: GameRef, settings: GameConfig) -> list[str]:
    """The planner's solution from the start (a second or less per problem), replayed to check that it wins."""
    problem_file = problems_root(settings) / game.source
    return plan_files(problem_file.parent / DOMAIN_FILE, problem_file)


# --------------------------------------------------------------------------------------------- the generators

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
            (folder / DOMAIN_FILE).write_text(_read(PROBLEMS_DIR / domain / DOMAIN_FILE), encoding="utf-8")
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
    split_note="60 generated problems sized like AgentBoard's: Gripper 20, Blocksworld 10, Barman 20, Tyreworld 10",
    describe=describe,
    expert=expert_plan,
)
"""PDDL problems in our STRIPS simulator: PR (the best share of goal conditions met) per domain."""

PDDL = register_suite(SUITE)


if __name__ == "__main__":
    sys.exit(main())
