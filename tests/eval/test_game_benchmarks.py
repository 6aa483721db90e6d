"""`agemem eval sciworld | pddl | babyai | frozenlake` on real games, through the real environments, the memory env,
batching and the CLI's config: a scripted agent that plays each game's expert solution (ScienceWorld's gold path,
the planner's plan, BabyAI's bot, FrozenLake's shortest safe path) wins every game it is given, one per task type,
with SR = PR = 100; an agent that does nothing useful wins none, with PR = 0 on every suite; the results table shows the
benchmark's headline; and `agemem compare` puts their columns beside each other. Each benchmark needs its extra
(skips without it, fails under AGEMEM_REQUIRE_GAMES=1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.games import evaluate_games
from agemem.eval.models import Backend
from agemem.tasks.games import game_settings, get_suite, load_games
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer, call
from tests.games_support import needs

FAST = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false", "eval.models=[scripted]"]

BENCHMARKS = {
    "sciworld": needs("sciworld", ("scienceworld",), ("java",)),
    "pddl": needs("pddl", ("pyperplan",)),
    "babyai": needs("babyai", ("minigrid",)),
    "frozenlake": needs("frozenlake", ("gymnasium",)),
}
"""each benchmark with the mark that skips it without its extra."""

EXPERT_STEPS = {"sciworld": 80, "pddl": 60, "babyai": 100, "frozenlake": 30}
"""a step budget above the expert solution of the first game of each task type played (tests only: the benchmarks
keep AgentBoard's 30)."""
EXPERT_TYPES = {"sciworld": ["classification", "lifespans"]}
"""the task types whose first game the expert plays (default: all); SciWorld's others have gold paths of 50 to 170
steps, or take up to a minute to plan (tests/tasks/test_sciworld.py plays one of nine topics)."""


@pytest.fixture(scope="module", autouse=True)
def _stop_simulators():
    """Stop the SciWorld JVMs this module started (about 2.5 GB each)."""
    yield
    from agemem.tasks.sciworld import shutdown_simulators

    shutdown_simulators()


def _config(name: str, *overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*FAST, f"{name}.debrief_replies=1", *overrides])


class ExpertAgent:
    """Plays the expert solution of each game, one command per reply, after a Retrieve_memory; in the debrief
    stores the solution with Add_memory, then answers ``done``. The game is recognised by its goal in the task
    message (SciWorld's first observation lists a room's contents in an order that varies between loads)."""

    def __init__(self, plans: dict[str, list[str]]):
        self.plans = plans
        self.position: dict[str, int] = {}

    def __call__(self, conversation: list[dict[str, Any]]) -> str:
        task = conversation[1]["content"]
        first = next(goal for goal in self.plans if goal in task)
        plan = self.plans[first]
        last_user = max(i for i, m in enumerate(conversation) if m["role"] == "user")
        if "The game is over" in conversation[last_user]["content"]:
            stored = any(m["role"] == "assistant" for m in conversation[last_user + 1 :])
            return answer("done") if stored else call(("Add_memory", {"content": "; ".join(plan)}))
        script = [call(("Retrieve_memory", {"query": "a solution"})), *(answer(command) for command in plan)]
        step = self.position.get(first, 0)
        self.position[first] = step + 1
        return script[step]


def _plans(name: str, config: AgeMemConfig) -> dict[str, list[str]]:
    """``{goal, or first observation where two games share a goal: expert plan}`` for the configured games."""
    suite = get_suite(name)
    settings = game_settings(config, suite)
    assert suite.expert is not None
    starts = []
    for game in load_games(config, suite):
        world = suite.open(game, settings)
        try:
            state = world.reset()
        finally:
            world.close()
        starts.append((state.goal, state.observation, suite.expert(game, settings)))
    goals = [goal for goal, _, _ in starts]
    plans = {goal if goal and goals.count(goal) == 1 else observation: plan for goal, observation, plan in starts}
    assert len(plans) == len(starts)
    return plans


def _evaluate(name: str, config: AgeMemConfig, out: Path, policy) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    tokenizer = load_tokenizer()
    backends = {"scripted": Backend(MessagesEngine(tokenizer, policy), tokenizer)}
    (results,) = evaluate_games(name, config, out, backends=backends, encoder=WordSetEncoder())
    examples = [json.loads(line) for line in (out / "examples.jsonl").read_text().splitlines()]
    return results, examples


def _params() -> list[Any]:
    return [pytest.param(name, marks=mark, id=name) for name, mark in BENCHMARKS.items()]


@pytest.mark.parametrize("name", _params())
def test_the_expert_wins_one_game_of_each_task_type(tmp_path, name):
    suite = get_suite(name)
    types = EXPERT_TYPES.get(name, list(suite.task_types))
    limit = len(types)  # the split is round-robin over task types: one game of each
    overrides = [f"{name}.task_types={json.dumps(types)}", f"{name}.limit={limit}", "eval.chunk_size=2"]
    config = _config(name, *overrides, f"{name}.max_env_steps={EXPERT_STEPS[name]}")
    plans = _plans(name, config)
    results, examples = _evaluate(name, config, tmp_path, ExpertAgent(plans))
    assert results["games"] == limit and results["SR"] == 100.0 and results["PR"] == 100.0
    assert results["ended_by"] == {"won": limit} and results["invalid"] == 0.0
    assert sorted(e["task_type"] for e in examples) == sorted(types)  # one game of each type
    # each game ends at its win: the whole plan, or less (SciWorld's plans keep waits after the win, in case the
    # simulator counts it a tick later)
    assert sum(e["steps"] for e in examples) <= sum(len(plan) for plan in plans.values())
    assert all(e["progress"] == 1.0 and e["won"] for e in examples)
    # agemem: a Retrieve before the plan and an Add in the debrief, in every game; memory carries across games
    assert results["TC"]["Retrieve_memory"] == results["TC"]["Add_memory"] == 1.0
    assert results["memory"] == limit
    headline = suite.headline
    assert all(results[f"{headline}_type"][t] == (100.0 if t in types else None) for t in suite.task_types)
    table = (tmp_path / "results.md").read_text()
    assert f"| scripted | agemem | {limit} | 100.0 |" in table
    if suite.has_score:
        assert results["score"] == 100.0


@pytest.mark.parametrize("name", _params())
def test_an_agent_that_does_nothing_wins_nothing(tmp_path, name):
    suite = get_suite(name)
    types = EXPERT_TYPES.get(name, list(suite.task_types))
    overrides = [f"{name}.task_types={json.dumps(types)}", f"{name}.limit={len(types)}", f"{name}.max_env_steps=3"]
    config = _config(name, *overrides, "eval.variants=[no_memory]")
    results, examples = _evaluate(name, config, tmp_path, lambda conversation: answer("xyzzy"))
    assert results["games"] == len(types) and results["SR"] == 0.0
    assert results["ended_by"] == {"step_limit": len(types)} and results["invalid"] == 3.0
    assert all(entry["admissible"] is False for e in examples for entry in e["transcript"])
    # AgentBoard's progress starts at 0 and only an accepted command moves it: refused commands score 0 even where
    # the start already meets a goal condition (SciWorld's openDoors simplification meets some tasks' optional step)
    for example, game in zip(examples, load_games(config, suite)):
        assert example["id"] == game.id and not example["won"] and example["progress"] == 0.0
    assert results["PR"] == 0.0


def test_the_cli_has_a_command_for_each_benchmark():
    from agemem.entrypoints.cli import _eval_overrides, build_parser

    parser = build_parser()
    for name in BENCHMARKS:
        args = parser.parse_args(["eval", name, "--model", "m", "--variant", "agemem", "--limit", "4"])
        assert args.benchmark == name and f"{name}.limit=4" in _eval_overrides(args)


@pytest.mark.slow
@pytest.mark.parametrize("name", _params())
def test_grpo_steps_on_real_games_change_the_weights(tmp_path, name):
    """`agemem train --config configs/games_tiny_cpu.yaml data.source=NAME`: two GRPO steps on real games."""
    import torch
    from safetensors.torch import load_file

    from agemem.entrypoints.cli import main
    from agemem.rollouts.config import PolicyConfig
    from agemem.rollouts.policy import load_policy
    from agemem.rollouts.records import read_trajectories

    out = tmp_path / "run"
    argv = ["train", "--config", "configs/games_tiny_cpu.yaml", f"data.source={name}", f"output_dir={out}"]
    # the random policy never wins: under reward.terms=effects every trajectory then earns the same (context pays
    # in proportion to the answer's score), so no advantage and no update; the paper's terms still vary
    argv.append("reward.terms=paper")
    assert main(argv) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in records] == [1, 2]
    for m in records:
        assert m["episodes"] == 4  # 2 games x K=2
        assert m["reward/task"] == m[f"reward/{name}/won"] and f"reward/{name}/progress" in m
        assert m["samples/llm_steps"] > 0 and "train/loss" in m
    trajectories = list(read_trajectories(out / "trajectories.jsonl"))
    assert trajectories and all(t.meta["benchmark"] == name for t in trajectories)
    assert all(1 <= t.meta["env_steps"] <= 3 and t.reward["task"] == float(t.meta["won"]) for t in trajectories)
    initial, _ = load_policy(PolicyConfig(device="cpu"))
    final = load_file(out / "checkpoints" / "step_000002" / "policy" / "model.safetensors")
    changed = [k for k, v in initial.state_dict().items() if k in final and not torch.equal(v, final[k])]
    assert len(changed) > 10


@BENCHMARKS["sciworld"]
@BENCHMARKS["pddl"]
@BENCHMARKS["babyai"]
def test_compare_puts_their_headlines_beside_each_other(tmp_path, capsys):
    from agemem.entrypoints.cli import main

    out = tmp_path / "compare"
    argv = ["compare", "--benchmark", "sciworld", "--benchmark", "pddl", "--benchmark", "babyai"]
    argv += ["--model", "tiny-random-qwen2", "--variant", "no_memory", "--limit", "1", "--out", str(out)]
    argv += ["sampling.max_tokens=16"]  # random tokens: a short reply is as good as a long one
    for name in BENCHMARKS:
        argv += [f"{name}.max_env_steps=2", f"{name}.max_replies_per_step=1", f"{name}.debrief_replies=0"]
    assert main(argv) == 0
    comparison = json.loads((out / "comparison.json").read_text())
    assert [(c["name"], c["metric"], c["items"]) for c in comparison["columns"]] == [
        ("sciworld", "SR", 1),
        ("pddl", "PR", 1),
        ("babyai", "SR", 1),
    ]
    (row,) = comparison["rows"]
    assert row["method"] == "No-Memory" and row["values"] == {"sciworld": 0.0, "pddl": 0.0, "babyai": 0.0}
    table = (out / "comparison.md").read_text()
    assert "| model | method | SciWorld (SR) | PDDL (PR) | BabyAI (SR) |" in table
