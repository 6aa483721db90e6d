"""One registration makes an environment: a QA set registered with one ``register_task`` call is a training task,
an ``agemem eval <name>`` command with its own flags, and a benchmark the harness plays; a QA benchmark plays its
own environment's source (the default source becomes its name, another environment's source is an error)."""

from __future__ import annotations

import pytest

from agemem.core.chat import load_tokenizer
from agemem.core.configlib import ConfigError, load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.benchmarks import benchmark_title, command_evaluations, get_benchmark, unregister_benchmark
from agemem.eval.models import Backend
from agemem.eval.qa import evaluate_qa, with_source
from agemem.tasks import Evaluation, Option, get_task, load_tasks, register_task, unregister_task
from agemem.tasks.qa import QATask
from agemem.tasks.stream import StreamItem, StreamSpec
from agemem.tasks.synthetic import generate_synthetic_tasks
from tests.conftest import WordSetEncoder
from tests.eval.agents import HotpotAgent, MessagesEngine

FAST = ["env.summarizer.backend=extractive", "logging.progress=false", "eval.plot=false", "eval.models=[scripted]"]


def _trivia(config) -> list:
    # a QA set of its own: four generated tasks whose seed is the environment's only setting
    return generate_synthetic_tasks(4, seed=int(config.data.split) if config.data.split.isdigit() else 11)


def _trivia_stream(config) -> list:
    # the same questions as a stream, each asked twice
    return [
        StreamItem(f"{task.id}-{n}", task.question, f"Question: {task.question}", task.answer, task.question)
        for task in _trivia(config)
        for n in range(2)
    ]


TRIVIA = QATask(
    "trivia",
    _trivia,
    evaluation=Evaluation(
        "four invented people's facts: J, EM, F1",
        "data.limit",
        (Option("--seed", "data.split", "the generator seed (data.split)", metavar="N"),),
        title="Trivia",
    ),
    stream=StreamSpec("qa", _trivia_stream),
)


@pytest.fixture
def trivia():
    register_task(TRIVIA)
    try:
        yield TRIVIA
    finally:
        unregister_task("trivia")
        unregister_benchmark("trivia")


def test_one_registration_is_a_training_task_a_cli_command_and_a_benchmark(trivia, tmp_path):
    from agemem.entrypoints.cli import _eval_overrides, build_parser

    assert get_task("trivia") is trivia and len(load_tasks(load_config(AgeMemConfig, overrides=["data.source=trivia"])))
    assert command_evaluations()["trivia"] is trivia.evaluation and benchmark_title("trivia") == "Trivia"
    args = build_parser().parse_args(["eval", "trivia", "--seed", "5", "--limit", "2"])
    assert args.out == "runs/eval/trivia"
    assert _eval_overrides(args) == ["data.split=5", "data.limit=2"]
    benchmark = get_benchmark("trivia")
    assert benchmark.name == "trivia" and benchmark.unit == "q" and benchmark.headline == "J"

    config = load_config(AgeMemConfig, overrides=[*FAST, *_eval_overrides(args)])
    tasks = generate_synthetic_tasks(4, seed=5)[:2]
    tokenizer = load_tokenizer()
    engine = MessagesEngine(tokenizer, HotpotAgent(tasks))
    (results,) = evaluate_qa(
        config, tmp_path, name="trivia", backends={"scripted": Backend(engine, tokenizer)}, encoder=WordSetEncoder()
    )
    assert results["benchmark"] == "trivia" and results["questions"] == 2
    assert results["EM"] == 100.0  # the gold agent on exactly the two seed-5 tasks the flags asked for


@pytest.mark.parametrize("name", ["synthetic", "hotpotqa"])
def test_a_qa_benchmark_plays_its_own_source(name):
    config = load_config(AgeMemConfig)
    played = with_source(config, get_task(name))
    expected = "synthetic" if name == "synthetic" else config.data.source  # the default source is HotpotQA's
    assert played.data.source == expected


def test_another_environments_source_is_refused_with_the_command_to_run():
    config = load_config(AgeMemConfig, overrides=["data.source=synthetic"])
    with pytest.raises(ConfigError, match=r"the synthetic environment.*run `agemem eval synthetic`"):
        with_source(config, get_task("hotpotqa"))
    file_source = load_config(AgeMemConfig, overrides=["data.source=/data/hotpot_dev.json"])
    assert with_source(file_source, get_task("hotpotqa")) is file_source  # a HotpotQA file is hotpotqa's
    with pytest.raises(ConfigError, match="hotpotqa environment"):
        with_source(file_source, get_task("synthetic"))


def test_one_registration_is_also_a_stream(trivia):
    from agemem.entrypoints.cli import build_parser
    from agemem.eval.stream.tasks import QAStreamTask, build_task

    args = build_parser().parse_args(["eval", "stream", "--task", "trivia"])
    assert args.task == "trivia"
    config = load_config(AgeMemConfig, overrides=["stream.task=trivia"])
    task = build_task(config)
    assert isinstance(task, QAStreamTask) and task.name == "trivia" and len(task.items()) == 8
    assert [item.id for item in task.items()][:2] == ["synthetic-11-0-0", "synthetic-11-0-1"]


def test_a_task_without_a_stream_is_refused_naming_the_streams():
    with pytest.raises(ConfigError, match=r"^stream\.task='pddl' is no stream; choose one of 'alfworld', 'hotpotqa'"):
        load_config(AgeMemConfig, overrides=["stream.task=pddl"])
