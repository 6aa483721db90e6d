"""An LLM judge endpoint that answers 500s for a stretch in the middle of a training run and garbage now and
then: the run goes on, and every failed or unparsable judgement is counted in the step's metrics and scored
by the fallback judge, never a silent 0. The policy is scripted (it answers every turn, each answer
different, so each episode asks the judge once and nothing is a cache hit); the rest is the real loop."""

from __future__ import annotations

import itertools
import json

import agemem.train.loop
from agemem.entrypoints.cli import main
from tests.fake_endpoint import FakeChatEndpoint
from tests.rollouts.scripted import ScriptedEngine, answer
from tests.train.tiny_run import TINY

FAILING = range(5, 9)
"""request numbers answered with HTTP 500: all of step 2's (4 episodes, one judged answer each)."""
GARBAGE = (3, 11)
"""request numbers answered without a score."""


def reply(body, number):
    if number in FAILING:
        return 500, ""
    if number in GARBAGE:
        return 200, "I would rather not grade this."
    return 200, "Score: 7/10"


def test_a_judge_endpoint_failing_mid_run_is_counted_and_the_run_goes_on(tmp_path, monkeypatch):
    numbers = itertools.count()

    def scripted(engine, model, tokenizer, accelerator):
        return ScriptedEngine(tokenizer, lambda conversation: answer(f"yes {next(numbers)}"))

    monkeypatch.setattr(agemem.train.loop, "build_engine", scripted)
    server = FakeChatEndpoint(reply)
    try:
        judge = [
            "reward.judge.backend=openai", "reward.judge.model=fake-judge", f"reward.judge.base_url={server.url}",
            "reward.judge.retries=1", "reward.judge.timeout_s=5",
        ]  # fmt: skip
        assert main(["train", *TINY, *judge, "max_steps=3", f"output_dir={tmp_path}"]) == 0
    finally:
        server.close()
    steps = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in steps] == [1, 2, 3] and len(server.requests) == 12
    # retries=1: one request an item, so each 500 is one error and each garbage reply one unparsable item;
    # each of them, and nothing else, went to the rule judge
    counted = [{key: m[f"judge/{key}"] for key in ("requests", "errors", "unparsable", "fallbacks")} for m in steps]
    assert counted == [
        {"requests": 4, "errors": 0, "unparsable": 1, "fallbacks": 1},
        {"requests": 4, "errors": 4, "unparsable": 0, "fallbacks": 4},
        {"requests": 4, "errors": 0, "unparsable": 1, "fallbacks": 1},
    ]
