"""`agemem eval alfworld` on the three real ALFWorld games under tests/data/alfworld: a scripted agent that plays
each game's expert plan wins them all through the real engine, memory env and batching; inadmissible commands and
replies without a command cost steps, never the run; memory persists across games and across a resume; the tiny
random policy runs end to end through the CLI. Game-playing tests need the `alfworld` extra and skip without it."""

from __future__ import annotations

import json
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import ConfigError, load_config
from agemem.core.context import SUMMARY_PREFIX
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.games import evaluate_games, snapshots
from agemem.eval.models import Backend
from agemem.tasks.alfworld import (
    SUITE,
    TASK_TYPES,
    AlfworldGame,
    AlfworldMissingError,
    discover_games,
    expert_plan,
    require_alfworld,
    split_dir,
)
from agemem.tasks.games import game_system_prompt, normalize_command
from tests.alfworld_data import DATA, needs_alfworld
from tests.conftest import WordSetEncoder
from tests.eval.agents import MessagesEngine, answer, call

FAST = [
    f"alfworld.data_dir={DATA}",
    "env.summarizer.backend=extractive",
    "logging.progress=false",
    "eval.plot=false",
    "eval.models=[scripted]",
]


def _config(*overrides: str) -> AgeMemConfig:
    return load_config(AgeMemConfig, overrides=[*FAST, *overrides])


def _examples(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


# --------------------------------------------------------------------------------------------- without the packages


def test_games_are_found_typed_and_ordered_round_robin_over_task_types():
    games = discover_games(str(DATA), "valid_seen")
    assert [g.task_type for g in games] == ["pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place"]
    assert games[0].id == "pick_and_place_simple-Book-None-Sofa-229/trial_T20190907_042856_259139"
    assert all(g.path.name == "game.tw-pddl" and g.task_type in TASK_TYPES for g in games)
    # the root may also be the json_2.1.1 folder itself
    assert split_dir(str(DATA / "json_2.1.1"), "valid_seen") == DATA / "json_2.1.1" / "valid_seen"


def test_a_missing_data_folder_names_the_path_and_the_fix(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"no ALFWorld valid_unseen games at .*valid_unseen.*alfworld-download"):
        discover_games(str(DATA), "valid_unseen")
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"nowhere/json_2.1.1/valid_seen \(\$ALFWORLD_DATA\).*--data-dir"):
        discover_games("", "valid_seen")
    with pytest.raises(ConfigError, match="valid_seen, valid_unseen"):
        discover_games(str(DATA), "train")


def test_commands_are_normalised_and_the_prompt_offers_only_the_tools_given():
    assert normalize_command('  "Go to  Desk 1." ') == "go to desk 1"
    assert normalize_command("> take book 1 from sofa 1") == "take book 1 from sofa 1"
    full = game_system_prompt(
        SUITE, ("Add_memory", "Retrieve_memory", "Summary_context"), "agemem", max_env_steps=50, show_admissible=True
    )
    assert "at most 50 commands" in full and "{tools}" in full and "<answer>done</answer>" in full
    assert "Retrieve_memory" in full and "Summary_context" in full and "Filter_context" not in full
    bare = game_system_prompt(SUITE, (), "agemem", max_env_steps=7)
    assert "{tools}" not in bare and "tool_call" not in bare and "at most 7 commands" in bare


# --------------------------------------------------------------------------------------------- scripted agents


@pytest.fixture(scope="module")
def plans() -> dict[str, tuple[str, list[str]]]:
    """``{first observation: (game id, expert plan)}`` for the test games."""
    found = {}
    for game in discover_games(str(DATA), "valid_seen"):
        with AlfworldGame(game, walkthrough=True) as world:
            first = world.reset().observation
            found[first] = (game.id, world.walkthrough)
    return found


class ExpertAgent:
    """Per game, plays ``opening`` (replies before the plan), then the expert plan, one command per reply; in the
    debrief stores what worked with Add_memory, then answers ``done``. Replies are scripted per game, so a
    summarised context does not lose its place."""

    def __init__(self, plans: dict[str, tuple[str, list[str]]], opening: Sequence[str] = ()):
        self.plans = plans
        self.opening = list(opening)
        self.position: dict[tuple[str, str], int] = {}

    def __call__(self, conversation: list[dict[str, Any]]) -> str:
        task = conversation[1]["content"]  # the protected task message stays second
        game_id, plan = self.plans[task.split("\n\nAdmissible commands:")[0]]
        last_user = max(i for i, m in enumerate(conversation) if m["role"] == "user")
        if "The game is over" in conversation[last_user]["content"]:
            stored = any(m["role"] == "assistant" for m in conversation[last_user + 1 :])
            return answer("done") if stored else call(("Add_memory", {"content": f"{game_id}: {'; '.join(plan)}"}))
        script = [*self.opening, *(answer(command) for command in plan)]
        key = (conversation[0]["content"], game_id)  # one script per variant (system prompt) and game
        step = self.position.get(key, 0)
        self.position[key] = step + 1
        return script[step]


def _evaluate(config, out, agent):
    tokenizer = load_tokenizer()
    engine = MessagesEngine(tokenizer, agent)
    runs = evaluate_games(
        "alfworld", config, out, backends={"scripted": Backend(engine, tokenizer)}, encoder=WordSetEncoder()
    )
    return runs, engine


RETRIEVE_FIRST = [call(("Retrieve_memory", {"query": "how to solve the task"}))]


@needs_alfworld
def test_the_expert_plan_wins_every_game_and_memory_carries_over(tmp_path, plans):
    config = _config("eval.chunk_size=2", "eval.plot=true")
    (results,), engine = _evaluate(config, tmp_path, ExpertAgent(plans, RETRIEVE_FIRST))
    lengths = {game_id: len(plan) for game_id, plan in plans.values()}
    assert results["games"] == 3 and results["SR"] == 100.0 and results["ended_by"] == {"won": 3}
    assert results["SR_type"] == {
        t: (100.0 if t in ("pick_and_place_simple", "look_at_obj_in_light", "pick_two_obj_and_place") else None)
        for t in TASK_TYPES
    }
    assert results["steps"] == results["steps_won"] == pytest.approx(sum(lengths.values()) / 3)
    assert results["invalid"] == 0.0 and results["played"] == 3
    look = discover_games(str(DATA), "valid_seen")[1]
    assert expert_plan(look) == next(plan for game_id, plan in plans.values() if game_id == look.id)
    examples = _examples(tmp_path / "examples.jsonl")
    assert {e["id"]: e["steps"] for e in examples} == lengths
    assert all(e["transcript"][-1]["admissible"] and e["won"] for e in examples)
    # agemem: one Retrieve before the plan, one Add in the debrief; the third game (second chunk) retrieves both
    assert results["TC"]["Retrieve_memory"] == results["TC"]["Add_memory"] == 1.0 and results["TC"]["total"] == 2.0
    assert results["memory"] == 3 and len(json.loads((tmp_path / "memory.json").read_text())) == 3
    retrieved = examples[2]["completions"][0]["completion"]
    assert "Retrieve_memory" in retrieved
    third = [c for c in engine.seen if examples[2]["task"] in c[1]["content"] and c[0]["content"].count('"name"') > 1]
    shown = json.loads(third[1][-1]["content"])
    assert {m["content"].split(":")[0] for m in shown["memories"]} == {examples[0]["id"], examples[1]["id"]}
    table = (tmp_path / "results.md").read_text()
    assert "| scripted | agemem | 3 | 100.0 | 100.0 | 100.0 | – | – | – | 100.0 |" in table
    assert (tmp_path / "results.png").stat().st_size > 10_000


@needs_alfworld
def test_inadmissible_commands_and_replies_without_a_command_cost_steps(tmp_path, plans):
    opening = [
        *RETRIEVE_FIRST,
        answer("fly to the moon"),  # step 1: inadmissible
        "I am not sure what to do.",  # step 2: a format error, then another: no command in 2 replies
        "Still thinking.",
        call(("Summary_context", {"span": "all"})),  # step 3: compress the context, then the plan begins
    ]
    config = _config("alfworld.max_replies_per_step=2", "alfworld.limit=1", "eval.variants=[agemem,no_memory]")
    runs, engine = _evaluate(config, tmp_path, ExpertAgent(plans, opening))
    results, no_memory = runs
    (example,) = _examples(tmp_path / "scripted__agemem" / "examples.jsonl")
    plan_length = len(next(plan for game_id, plan in plans.values() if game_id == example["id"]))
    assert example["won"] and example["steps"] == plan_length + 2
    assert (example["invalid"], example["no_action"], example["summaries"]) == (1, 1, 1)
    assert example["transcript"][0] == {
        "command": "fly to the moon",
        "admissible": False,
        "observation": 'Nothing happens: "fly to the moon" is not an admissible command; write one exactly as listed.',
    }
    assert example["transcript"][1]["command"] is None
    assert results["SR"] == 100.0 and results["invalid"] == 1.0 and results["no_action"] == 1.0
    # no_memory: no tools offered (Retrieve and Summary are unknown-tool errors the agent sees), no debrief; the
    # steps cost the same
    (bare,) = _examples(tmp_path / "scripted__no_memory" / "examples.jsonl")
    assert bare["won"] and bare["steps"] == example["steps"] and (bare["invalid"], bare["no_action"]) == (1, 1)
    assert no_memory["TC"]["total"] == 0.0 and no_memory["memory"] == 0 and bare["summaries"] == 0
    no_tools = [c for c in engine.seen if '"name": "Add_memory"' not in c[0]["content"]]
    assert "no tools are available" in no_tools[1][-1]["content"]
    assert not any("The game is over" in c[-1]["content"] for c in no_tools)
    table = (tmp_path / "comparison.md").read_text()
    assert "| scripted | agemem | 1 | 100.0 | 100.0 |" in table
    assert "| scripted | no_memory | 1 | 100.0 | 100.0 |" in table
    # the summary replaced the steps before it; the protected task message stays second
    last = [c for c in engine.seen if '"name": "Add_memory"' in c[0]["content"]][-1]
    assert "Your task is to: " + example["task"] in last[1]["content"]
    assert last[2]["content"].startswith(SUMMARY_PREFIX)
    assert not any(m["content"].startswith(("[step 1/", "[step 2/")) for m in last)


@needs_alfworld
def test_a_game_the_engine_cannot_load_ends_alone(tmp_path):
    source = discover_games(str(DATA), "valid_seen")[1]
    broken = tmp_path / "data" / "json_2.1.1" / "valid_seen" / source.id
    shutil.copytree(source.path.parent, broken)
    game = json.loads((broken / "game.tw-pddl").read_text())
    game["pddl_problem"] = "(define (problem broken"
    (broken / "game.tw-pddl").write_text(json.dumps(game))
    config = _config(f"alfworld.data_dir={tmp_path / 'data'}")
    (results,), engine = _evaluate(config, tmp_path / "out", ExpertAgent({}))
    (example,) = _examples(tmp_path / "out" / "examples.jsonl")
    assert example["ended_by"] == "env_error" and source.id in example["error"] and not example["won"]
    assert results["SR"] == 0.0 and results["ended_by"] == {"env_error": 1} and engine.seen == []


@needs_alfworld
def test_resume_skips_finished_games_and_restores_the_memory(tmp_path, plans):
    agent = ExpertAgent(plans, RETRIEVE_FIRST)
    _, engine = _evaluate(_config("alfworld.limit=1", "eval.chunk_size=1"), tmp_path, agent)
    assert sorted(snapshots(tmp_path)) == [1]
    limit2 = _config("alfworld.limit=2", "eval.chunk_size=1")
    (results,), engine = _evaluate(limit2, tmp_path, ExpertAgent(plans, RETRIEVE_FIRST))
    assert results["played"] == 1 and results["resumed"] == 1 and results["games"] == 2
    played = {c[1]["content"] for c in engine.seen}
    assert len(played) == 1  # only the second game was played
    examples = _examples(tmp_path / "examples.jsonl")
    retrieval = json.loads(next(c for c in engine.seen if len(c) == 4)[-1]["content"])
    assert [m["content"].split(":")[0] for m in retrieval["memories"]] == [examples[0]["id"]]  # restored memory
    assert sorted(snapshots(tmp_path)) == [1, 2]
    # killed after the memory was saved but before the records were appended: the game is played again
    lines = (tmp_path / "examples.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "examples.jsonl").write_text(lines[0] + '{"id": "torn')
    (results,), engine = _evaluate(limit2, tmp_path, ExpertAgent(plans, RETRIEVE_FIRST))
    assert results["played"] == 1 and results["SR"] == 100.0 and results["memory"] == 2
    assert _examples(tmp_path / "examples.jsonl")[1]["completions"] == examples[1]["completions"]
    assert sorted(snapshots(tmp_path)) == [1, 2]
    # a finished run plays nothing; another evaluation in the same folder is refused
    (results,), engine = _evaluate(limit2, tmp_path, ExpertAgent(plans))
    assert engine.seen == [] and results["played"] == 0
    with pytest.raises(ConfigError, match="variant"):
        _evaluate(_config("eval.variants=[no_memory]"), tmp_path, ExpertAgent(plans))


@needs_alfworld
def test_tiny_random_policy_end_to_end_through_the_cli(tmp_path, capsys):
    from agemem.entrypoints.cli import main

    out = tmp_path / "eval"
    argv = ["eval", "alfworld", "--data-dir", str(DATA), "--split", "valid_seen", "--limit", "2", "--out", str(out)]
    tiny = ["sampling.max_tokens=4", "alfworld.max_env_steps=2", "alfworld.max_replies_per_step=1"]
    tiny += ["alfworld.debrief_replies=0", "env.summarizer.backend=extractive", "logging.progress=false"]
    assert main([*argv, "--model", "tiny-random-qwen2", *tiny]) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["games"] == 2 and results["SR"] == 0.0 and results["steps"] == 2.0  # random tokens never win
    assert results["ended_by"] == {"step_limit": 2} and results["TN"] > 1000
    for example in _examples(out / "examples.jsonl"):
        assert example["replies"] == 2 and len(example["transcript"]) == 2  # two steps, one reply each
    assert (out / "results.png").stat().st_size > 10_000
    printed = capsys.readouterr().out
    assert "ALFWorld valid_seen (2 games)" in printed and "results.md" in printed


def test_a_missing_package_says_how_to_install_it(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def without_textworld(name, *args, **kwargs):
        if name.split(".")[0] in ("textworld", "alfworld"):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", without_textworld)
    with pytest.raises(AlfworldMissingError, match=r"pip install 'agemem\[alfworld\]'"):
        require_alfworld()
