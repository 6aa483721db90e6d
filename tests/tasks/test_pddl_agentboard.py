"""AgentBoard's own 60 PDDL problems (the paper's PDDL column), read from the shared copy (GPL-2.0 data: never in
the package) and played through our simulator. Our simulator's valid actions and next states agree with pyperplan's
reading of the same files in every state the expert and a seeded random agent reach; the expert wins every problem
that can be won, and the two that cannot are proved so; progress is AgentBoard's (0 at reset, the best share of the
goal after an accepted action); `agemem eval pddl --data DIR` plays them. Needs the `pddl` extra (pyperplan)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from agemem.core.configlib import ConfigError, load_config
from agemem.tasks import pddl
from agemem.tasks.config import TaskRunConfig
from agemem.tasks.games import load_games
from agemem.tasks.pddl import NoPlanError, PddlConfig
from agemem.tasks.pddl.expert import best_reachable, fact_name, require_pddl
from agemem.tasks.pddl.simulator import successor
from tests.games_support import needs, needs_shared, shared_data

pytestmark = [needs("pddl", ("pyperplan",)), needs_shared("agentboard_pddl")]

DATA = shared_data("agentboard_pddl") or Path("agentboard_pddl")
SETTINGS = PddlConfig(problems_dir=str(DATA))
UNWINNABLE = {"blocks/problem1": 0.0, "blocks/problem5": 0.5}
"""AgentBoard's problems whose goal no reachable state satisfies, with the best share of it any state reaches:
problem1's initial state lets no action apply (b2 is clear but stands nowhere, b1 is both on the table and on b3);
problem5 asks for b1 and b5 both on b3."""


@pytest.fixture(scope="module")
def games():
    return load_games(load_config(TaskRunConfig, overrides=[f"pddl.problems_dir={DATA}"]), pddl.SUITE)


@pytest.fixture(scope="module")
def plans(games):
    """The expert's plan of each problem (None where it has none)."""
    found = {}
    for game in games:
        try:
            found[game.id] = pddl.expert_plan(game, SETTINGS)
        except NoPlanError:
            found[game.id] = None
    return found


def test_agentboard_s_layout_is_found_with_its_sixty_problems_round_robin(games):
    counts = {domain: sum(game.task_type == domain for game in games) for domain in pddl.DOMAINS}
    assert counts == {"gripper": 20, "blocksworld": 10, "barman": 20, "tyreworld": 10}
    assert [game.task_type for game in games[:4]] == list(pddl.DOMAINS)  # a --limit prefix covers every domain
    blocks = [game.id for game in games if game.task_type == "blocksworld"]
    assert blocks[:3] == ["blocks/problem1", "blocks/problem2", "blocks/problem3"] and blocks[-1] == "blocks/problem10"
    assert games[0].source == "gripper/prob01.pddl"
    described = pddl.describe(SETTINGS)
    assert described["problems"] == str(DATA) and described["domains"] == list(pddl.DOMAINS)


def test_the_expert_wins_every_problem_that_can_be_won(plans, games):
    unwinnable = {game_id for game_id, plan in plans.items() if plan is None}
    assert unwinnable == set(UNWINNABLE)
    for game in games:
        plan = plans[game.id]
        if plan is None:
            continue
        world = pddl.open_game(game, SETTINGS)
        state = world.reset()
        for command in plan:
            assert command in state.admissible
            state = world.step(command)
        assert state.won and state.progress == 1.0, game.id


@pytest.mark.parametrize("game_id", sorted(UNWINNABLE))
def test_an_unwinnable_problem_is_proved_so_and_its_best_share_is_known(games, game_id):
    game = next(g for g in games if g.id == game_id)
    with pytest.raises(NoPlanError, match="cannot be won: none of its"):
        pddl.expert_plan(game, SETTINGS)
    world = pddl.open_game(game, SETTINGS)
    world.reset()
    best, _ = best_reachable(world.task)
    assert best == UNWINNABLE[game_id]


def _pyperplan_task(game):
    """pyperplan's grounding of the same files, statics kept and no operator pruned (so that its applicable set is
    every applicable action, not only those relevant to the goal)."""
    from pyperplan import grounding

    parts = require_pddl()
    domain_file, problem_file = pddl.game_files(game, SETTINGS)
    parser = parts["Parser"](str(domain_file), str(problem_file))
    problem = parser.parse_problem(parser.parse_domain())
    return grounding.ground(problem, remove_statics_from_initial_state=False, remove_irrelevant_operators=False)


def _states_reached(world, plan, seed: int, random_steps: int = 40):
    """The states of the expert's play, then of a seeded random agent's (uniform over the listed actions)."""
    start = world.task.problem.init
    states = [start]
    state = start
    for command in plan or []:
        state = successor(state, world.task.by_command[command])
        states.append(state)
    rng = random.Random(seed)
    state = start
    for _ in range(random_steps):
        actions = world.task.applicable(state)
        if not actions:
            break
        state = successor(state, rng.choice(actions))
        states.append(state)
    return states


def test_valid_actions_and_next_states_agree_with_pyperplan_everywhere_the_agents_go(games, plans):
    checked = 0
    for index, game in enumerate(games):
        world = pddl.open_game(game, SETTINGS)
        world.reset()
        theirs = _pyperplan_task(game)
        operators = {op.name: op for op in theirs.operators}
        for state in set(_states_reached(world, plans[game.id], seed=index)):
            facts = frozenset(fact_name(atom) for atom in state)
            ours = {fact_name((action.name, *action.args)): action for action in world.task.applicable(state)}
            # an action that would change nothing is not valid in AgentBoard (nor here): filter pyperplan's too
            valid = {name for name, op in operators.items() if op.applicable(facts) and op.apply(facts) != facts}
            assert set(ours) == valid, (game.id, sorted(set(ours) ^ valid)[:4])
            for name, action in ours.items():
                after = frozenset(fact_name(atom) for atom in successor(state, action))
                assert after == operators[name].apply(facts), (game.id, name)
            checked += 1
    assert checked > 1000  # every problem's expert path and a random walk: thousands of states


def test_progress_is_agentboard_s_the_best_share_after_an_accepted_action():
    """blocks/problem10 starts with one of its six goal conditions true: AgentBoard scores 0 until an action is
    taken, then the share of the goal's conditions that hold, and keeps the best."""
    from agemem.tasks.textgame import GameItem

    game = GameItem("blocks/problem10", "blocksworld", "blocks/problem10.pddl")
    world = pddl.open_game(game, SETTINGS)
    start = world.reset()
    goal = world.task.problem.goal
    held = [atom for atom in goal if atom in world.task.problem.init]
    assert len(goal) == 6 and len(held) == 1 and start.progress == pytest.approx(1 / 6)
    # the loop credits nothing at reset (tests/eval/test_games.py plays it through an episode); after the first
    # accepted action that leaves the true condition alone, progress is 1 condition of 6
    keeps = [c for c in start.admissible if all(a in successor(world.state, world.task.by_command[c]) for a in held)]
    first = keeps[0]
    assert world.step(first).progress == pytest.approx(1 / 6)


def test_the_cli_flag_sets_the_folder_and_a_wrong_folder_names_both_layouts(tmp_path):
    from agemem.entrypoints.cli import _eval_overrides, build_parser

    args = build_parser().parse_args(["eval", "pddl", "--data", str(DATA), "--limit", "4"])
    assert f"pddl.problems_dir={DATA}" in _eval_overrides(args)
    with pytest.raises(ConfigError, match=r"AgentBoard's \(gripper.pddl with gripper/"):
        pddl.configured_domains(PddlConfig(problems_dir=str(tmp_path)))


def test_agemem_eval_plays_them_the_expert_wins_and_doing_nothing_scores_zero(tmp_path):
    """Through the evaluation (episodes, memory, the results table): the expert wins one problem of each domain
    with SR = PR = 100; an agent whose commands are all refused scores PR 0, also on blocks/problem10, whose start
    already meets one goal condition of six (our old reading gave it 16.7)."""
    from tests.eval.agents import answer
    from tests.eval.test_game_benchmarks import ExpertAgent, _config, _evaluate, _plans

    subset = tmp_path / "agentboard_subset"  # one winnable problem of each game, laid out as AgentBoard's
    for game, problem in {"gripper": "prob01", "blocks": "problem2", "barman": "p01", "tyreworld": "p01"}.items():
        (subset / game).mkdir(parents=True)
        shutil.copy(DATA / f"{game}.pddl", subset / f"{game}.pddl")
        shutil.copy(DATA / game / f"{problem}.pddl", subset / game / f"{problem}.pddl")
    data = [f"pddl.problems_dir={subset}", "pddl.max_env_steps=60", "eval.chunk_size=2"]
    config = _config("pddl", *data)
    results, examples = _evaluate("pddl", config, tmp_path / "expert", ExpertAgent(_plans("pddl", config)))
    assert results["games"] == 4 and results["SR"] == 100.0 and results["PR"] == 100.0
    assert sorted(e["task_type"] for e in examples) == sorted(pddl.DOMAINS)
    nothing = _config("pddl", f"pddl.problems_dir={DATA}", "pddl.task_types=[blocksworld]", "pddl.max_env_steps=3")
    results, examples = _evaluate("pddl", nothing, tmp_path / "nothing", lambda conversation: answer("xyzzy"))
    assert results["games"] == 10 and results["PR"] == 0.0 and results["SR"] == 0.0
    assert {e["id"] for e in examples} >= {"blocks/problem10"} and all(e["progress"] == 0.0 for e in examples)


def test_a_hand_checked_partial_episode_scores_its_best_point(tmp_path):
    """blocks/problem10 (goal: b1 on b7, b2 on b5, b3 on b2, b4 on b1, b5 on b6, b7 on b3; b2 on b5 holds at the
    start). The agent plays the expert's first 14 commands, then undoes the last stack, then only refused commands:
      start                                   b2/b5 holds             PR 0 (nothing done yet)
      4 unstack/put down pairs                b2/b5 undone            0/6 now, best 1/6 (after the first one)
      pick up b5, stack b5 on b6              b5/b6                   1/6
      pick up b2, stack b2 on b5              b5/b6, b2/b5            2/6
      pick up b3, stack b3 on b2              b5/b6, b2/b5, b3/b2     3/6  <- the best point
      unstack b3 from b2                      b5/b6, b2/b5            2/6
    so PR = 100 * 3/6 = 50.0, not the final 33.3."""
    from tests.eval.agents import answer
    from tests.eval.test_game_benchmarks import _config, _evaluate

    subset = tmp_path / "problem10"
    (subset / "blocks").mkdir(parents=True)
    shutil.copy(DATA / "blocks.pddl", subset / "blocks.pddl")
    shutil.copy(DATA / "blocks" / "problem10.pddl", subset / "blocks" / "problem10.pddl")
    game = load_games(load_config(TaskRunConfig, overrides=[f"pddl.problems_dir={subset}"]), pddl.SUITE)[0]
    commands = [*pddl.expert_plan(game, PddlConfig(problems_dir=str(subset)))[:14], "unstack b3 from b2"]
    sent = iter([*commands, *["xyzzy"] * 10])

    def agent(conversation):
        last = [m for m in conversation if m["role"] == "user"][-1]["content"]
        return answer("done" if "The game is over" in last else next(sent))

    config = _config("pddl", f"pddl.problems_dir={subset}", "pddl.max_env_steps=18", "eval.variants=[no_memory]")
    results, (example,) = _evaluate("pddl", config, tmp_path / "out", agent)
    assert commands[12:14] == ["pick up b3", "stack b3 on b2"]
    assert results["PR"] == pytest.approx(50.0) and example["progress"] == pytest.approx(3 / 6) and not example["won"]
    assert [entry["admissible"] for entry in example["transcript"]] == [True] * 15 + [False] * 3
