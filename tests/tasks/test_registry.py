"""The task registry: data.source picks a registered task (or the task that accepts the source), unknown names
fail with the known tasks and the fix, the QA tasks load what the old loader did, and a new task is one
registration that `agemem rollout` (the real driver, the tiny random policy) plays and scores."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from agemem.core.configlib import ConfigError, load_config
from agemem.core.resources import BUNDLED as BUNDLED_FILES
from agemem.entrypoints.roots import AgeMemConfig
from agemem.rollouts.config import RolloutConfig
from agemem.rollouts.driver import EpisodeFactory
from agemem.rollouts.episode import Episode, Stages
from agemem.rollouts.records import Task, Trajectory, read_trajectories
from agemem.tasks import (
    get_task,
    load_task_pool,
    load_tasks,
    register_task,
    source_of,
    task_for_source,
    task_names,
)
from agemem.tasks.base import unregister_task
from agemem.tasks.hotpotqa import load_hotpotqa
from agemem.tasks.rollout import run_rollouts, task_scorer
from agemem.tasks.synthetic import generate_synthetic_tasks


def test_the_built_in_tasks_are_registered_and_sources_resolve_to_them():
    assert {"alfworld", "hotpotqa", "synthetic"} <= set(task_names())
    for source, name in [
        ("synthetic", "synthetic"),
        ("alfworld", "alfworld"),
        ("pddl", "pddl"),
        ("hotpotqa", "hotpotqa"),
        ("bundled:hotpotqa", "hotpotqa"),
        ("hotpotqa/hotpot_qa", "hotpotqa"),
        ("data/hotpot_dev_distractor_v1.json", "hotpotqa"),
    ]:
        assert task_for_source(source).name == name


def test_an_unknown_task_names_the_known_ones_and_the_fix():
    with pytest.raises(
        ConfigError,
        match=r"no task named 'nope'; known tasks: alfworld, babyai, frozenlake, hotpotqa, locomo, pddl, sciworld, "
        r"synthetic.*fix",
    ):
        get_task("nope")
    with pytest.raises(ConfigError, match=r"data.source='synthtic' names no task; known tasks: .*register_task"):
        task_for_source("synthtic")
    with pytest.raises(ValueError, match="registered already"):
        register_task(replace(get_task("synthetic")))


@pytest.mark.parametrize("task", ["hotpotqa", "synthetic", "pddl"])
@given(location=st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=30))
def test_a_location_names_its_task_and_no_other_environment_s_file_is_read_as_hotpotqa(task, location):
    # <task>:<location> always picks the task, whatever the location holds
    assert task_for_source(f"{task}:{location}").name == task
    assert source_of(task, f"{task}:{location}") == f"{task}:{location}"
    assume(location not in task_names() and ":" not in location and "hotpot" not in location.lower())
    # a bare location names no task (only one whose name says hotpot is HotpotQA's): the error shows the form
    with pytest.raises(ConfigError, match=r"names no task.*<task>:<location>, e\.g\. hotpotqa:/data/dev\.json"):
        task_for_source(location)
    assert source_of(task, location) == f"{task}:{location}"  # `agemem eval <task> --data LOCATION`


def test_a_hotpotqa_location_loads_what_the_loader_reads_there():
    from agemem.tasks.hotpotqa import BUNDLED, hotpotqa_location

    sample = str(BUNDLED_FILES["hotpotqa"])
    config = load_config(AgeMemConfig, overrides=[f"data.source=hotpotqa:{sample}", "data.limit=3"])
    assert hotpotqa_location(config.data.source) == sample and hotpotqa_location("hotpotqa") == BUNDLED
    assert [t.id for t in load_tasks(config)] == [t.id for t in load_hotpotqa(sample)[:3]]
    for other_environment_file in ("/data/locomo10.json", "trivia.jsonl", "synthetic.", "./runs/x"):
        with pytest.raises(ConfigError, match="names no task"):
            task_for_source(other_environment_file)


def _qa_oracle(data):
    """What the QA sources loaded before the registry (the if/else on data.source that the registry replaced)."""
    if data.source == "synthetic":
        s = data.synthetic
        tasks = generate_synthetic_tasks(
            s.num_tasks,
            seed=s.seed,
            entities_per_task=s.entities_per_task,
            attributes_per_entity=s.attributes_per_entity,
            distractors_per_task=s.distractors_per_task,
        )
    else:
        tasks = load_hotpotqa(data.source, split=data.split, hub_config=data.hub_config)
    return tasks[: data.limit] if data.limit else tasks


@pytest.mark.parametrize(
    "overrides", [["data.source=synthetic", "data.synthetic.num_tasks=5", "data.limit=3"], ["data.limit=4"]]
)
def test_the_qa_tasks_load_what_the_qa_loader_loads(overrides):
    config = load_config(AgeMemConfig, overrides=overrides)
    assert [t.to_json() for t in load_tasks(config)] == [t.to_json() for t in _qa_oracle(config.data)]
    tasks, pool = load_task_pool(config)
    assert len(tasks) == config.data.limit and len(pool) >= len(tasks)
    bundled = load_tasks(replace(config, data=replace(config.data, source="hotpotqa")))
    assert bundled[0].id == load_hotpotqa("bundled:hotpotqa", split=config.data.split)[0].id


# --------------------------------------------------------------------------------------------- a new task


@dataclass(frozen=True)
class ToyScorer:
    def __call__(self, trajectories: Sequence[Trajectory], tasks: Sequence[Task]) -> list[dict[str, float]]:
        out = []
        for trajectory in trajectories:
            trajectory.reward = {"total": float("kiwi" in (trajectory.answer or "")), "steps": len(trajectory.steps)}
            out.append(trajectory.reward)
        return out

    def report(self, breakdowns: Sequence[dict[str, float]]) -> dict[str, Any]:
        return {"rewards": {"total": sum(b["total"] for b in breakdowns) / len(breakdowns)}, "judge": {"name": "toy"}}


@dataclass(frozen=True)
class ToyTask:
    """One fact in Stage 1, no distractors, a question about it in Stage 3."""

    name: str = "toy"
    uses_distractors: bool = False

    def accepts(self, source: str) -> bool:
        return False

    def configure(self, config: AgeMemConfig) -> AgeMemConfig:
        return replace(config, env=replace(config.env, system_prompt="Remember facts. {tools}"))

    def load(self, config: AgeMemConfig) -> list[Task]:
        return [Task(f"toy-{i}", "What is the code word?", "kiwi", [], []) for i in range(3)]

    def stages(self, task: Task, distractors: list[str], rollout: RolloutConfig) -> Stages:
        return Stages([f"The code word is {task.answer}."], [], task.question)

    def episodes(self, config: AgeMemConfig) -> EpisodeFactory:
        def play(task, distractors, env, setup, rollout_index):
            stages = self.stages(task, distractors, setup.config)
            return Episode(task, distractors, env, setup, rollout_index, stages=stages).play()

        return play

    def scorer(self, config: AgeMemConfig, encoder) -> ToyScorer:
        return ToyScorer()


@pytest.fixture
def toy():
    spec = register_task(ToyTask())
    yield spec
    unregister_task(spec.name)


def test_a_new_task_is_one_registration_and_the_real_driver_plays_and_scores_it(toy, tmp_path):
    overrides = ["data.source=toy", "data.limit=2", "rollout.rollouts_per_task=2", "sampling.max_tokens=8"]
    overrides += ["rollout.stage1_max_steps=1", "rollout.stage3_max_steps=1", "env.summarizer.backend=extractive"]
    overrides += ["logging.progress=false", "distractors.cache_dir="]
    config = load_config(AgeMemConfig, overrides=overrides)
    record = run_rollouts(config, tmp_path, make_scorer=task_scorer(config))
    assert record["summary"]["episodes"] == 4 and record["judge"] == {"name": "toy"}
    trajectories = list(read_trajectories(tmp_path / "trajectories.jsonl"))
    assert sorted((t.task_id, t.rollout_index) for t in trajectories) == [
        ("toy-0", 0), ("toy-0", 1), ("toy-1", 0), ("toy-1", 1),
    ]  # fmt: skip
    for t in trajectories:
        assert t.distractors == [] and "reward" in json.dumps(t.to_json()) and "total" in t.reward
        assert "The code word is kiwi." in t.steps[0].prompt_text and "Remember facts." in t.steps[0].prompt_text
        assert {s.stage for s in t.steps} <= {1, 3} and t.question == "What is the code word?"
