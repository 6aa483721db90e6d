"""The PDDL simulator: a parser for the STRIPS subset the bundled domains use, grounding, the text the agent reads
and writes, and one problem as a text game (:class:`PddlGame`). See :mod:`agemem.tasks.pddl` for the games."""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.tasks.textgame import GameState

Atom = tuple[str, ...]
"""a ground atom: the predicate, then its arguments (``("on", "b1", "b2")``)."""

DOMAINS: tuple[str, ...] = ("gripper", "blocksworld", "barman", "tyreworld")
"""the four domains, in AgentBoard's order (``game_name: [gripper, blockworld, barman, tyreworld]``)."""
DOMAIN_FILE = "domain.pddl"
INVALID = "The action is not valid and therefore takes no effect"


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
    # a variable starts a token even without a space before it: AgentBoard's barman writes ``?l - level?l1 - level``
    tokens = re.findall(r"[()]|\??[^\s()?]+", re.sub(r";[^\n]*", "", text).lower())
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
        "pickup": "pick up {0}",  # AgentBoard's blocksworld-4ops names them so
        "putdown": "put down {0}",
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
        "room": "{0} is a room",  # AgentBoard's gripper-strips types its objects with these static facts
        "ball": "{0} is a ball",
        "gripper": "{0} is a gripper",
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


PHRASED_AS: dict[str, str] = {"blocksworld-4ops": "blocksworld", "gripper-strips": "gripper"}
"""AgentBoard's domain names whose actions take the same arguments in the same order as ours: they read as ours
(its ``barman`` and ``tyreworld`` already share our names)."""


def phrasebook(domain: str) -> str:
    """The domain whose phrases :data:`ACTION_TEXT`, :data:`FACT_TEXT` and :data:`RULES` use for ``domain``."""
    return PHRASED_AS.get(domain, domain)


def action_text(domain: str, name: str, args: Sequence[str]) -> str:
    """A ground action as a command: the domain's phrase, else ``<action> <arg1> <arg2> ...``."""
    template = ACTION_TEXT.get(phrasebook(domain), {}).get(name)
    return template.format(*args) if template else " ".join((name, *args))


def fact_text(domain: str, atom: Atom) -> str:
    """A ground atom as a sentence without its full stop (the domain's phrase, else ``<predicate> <args>``)."""
    template = FACT_TEXT.get(phrasebook(domain), {}).get(atom[0])
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
        self.domain = _domain_of(str(domain_file), read_pddl(domain_file))
        self.problem = parse_problem(read_pddl(problem_file), str(problem_file))
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


def read_pddl(path: Path) -> str:
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
        parts = [RULES.get(phrasebook(domain), f"Planning domain {domain}."), f"Goal: {self.goal()}."]
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
