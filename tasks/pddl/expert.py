"""The expert's plans: pyperplan's greedy best-first search with h_add on the same files (the optional extra
``pip install 'agemem[pddl]'``), replayed through our simulator before a plan is returned."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agemem.core.configlib import ConfigError
from agemem.tasks.pddl.simulator import Atom, PddlGame, PlanningTask, goal_share, successor
from agemem.tasks.textgame import NoPlanError

INSTALL_HINT = "the PDDL expert planner needs the optional extra: pip install 'agemem[pddl]' (pyperplan)"


class PddlMissingError(ConfigError):
    """pyperplan (the expert's planner) is missing; the message says how to install it."""


SEARCH_BUDGET = 1500
"""heuristic evaluations a search may spend before the expert plans the goal one condition at a time (pyperplan's
search over two Barman cocktails at once takes minutes; one at a time, a fraction of a second)."""


PROOF_BUDGET = 200_000
"""states a breadth-first search of the simulator may visit to prove a goal unreachable once pyperplan's search
gave up (AgentBoard's Blocksworld problems have at most a few thousand)."""


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
        raise NoPlanError(f"pyperplan proved {task.name} unsolvable: no reachable state satisfies its goal")
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
            raise NoPlanError(f"pyperplan found no plan for {task.name} within {SEARCH_BUDGET} states")
        for step in stage:
            state = successor(state, planning.by_name[step])
        steps += stage
    return steps


def best_reachable(task: PlanningTask, budget: int = PROOF_BUDGET) -> tuple[float, int] | None:
    """``(the best share of the goal any reachable state satisfies, states visited)`` by breadth-first search of
    the simulator's states; None when more than ``budget`` states are reachable (nothing is proved)."""
    start = task.problem.init
    goal = task.problem.goal
    seen, frontier, best = {start}, [start], goal_share(start, goal)
    while frontier:
        following = []
        for state in frontier:
            for action in task.applicable(state):
                after = successor(state, action)
                if after not in seen:
                    seen.add(after)
                    following.append(after)
                    best = max(best, goal_share(after, goal))
            if len(seen) > budget:
                return None
        frontier = following
    return best, len(seen)


def unreachable_goal(problem_file: Path, task: PlanningTask, error: NoPlanError) -> NoPlanError:
    """``error``, restated with the proof when a search of every reachable state shows that the goal is
    unreachable (then no planner could do better); as it was when there are too many states to search."""
    found = best_reachable(task)
    if found is None or found[0] == 1.0:
        return error
    best, states = found
    return NoPlanError(
        f"{problem_file} cannot be won: none of its {states} reachable states satisfies the goal (the best satisfies "
        f"{best:.0%} of its conditions), so it has no expert plan"
    )


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
    try:
        steps = budgeted_search(parts, task)
        if steps is None:  # the goal's conditions one at a time, in each rotation of their order: the shortest plan
            plans = [serial_plan(parts, task, game.task, goal[turn:] + goal[:turn]) for turn in range(len(goal))]
            steps = min((without_detours(game.task, plan) for plan in plans), key=len)
    except NoPlanError as error:
        raise unreachable_goal(problem_file, game.task, error) from None
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
