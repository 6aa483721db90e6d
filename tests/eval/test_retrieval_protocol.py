"""One retrieval protocol for every memory: the memories shown before each step (variant ``rag`` and the memory
systems) are searched with one query rule and one k, set in ``eval.rag_query`` / ``eval.rag_top_k`` and recorded
with the run."""

from __future__ import annotations

import pytest

from agemem.core.config import EnvConfig
from agemem.core.configlib import load_config
from agemem.entrypoints.roots import AgeMemConfig
from agemem.eval.runner import retrieval_protocol
from agemem.eval.variants import apply_variant
from agemem.rollouts.chat_driver import ChatDriver
from agemem.rollouts.config import RolloutConfig
from agemem.rollouts.engines.chat import ChatReply
from agemem.rollouts.episode import EpisodeSetup
from agemem.tasks.alfworld import SUITE, AlfworldConfig, Game
from agemem.tasks.games import GameEpisode
from tests.eval.stream.transcripts import WalkGame


def _play(make_env, qwen_tokenizer, rag_query: str):
    env = make_env(EnvConfig(tools=[], rag_top_k=2, rag_query=rag_query))
    for text in ("room 3 holds the key", "the key opens the door", "go to room 2 first"):
        env.ltm.add(text, scope=env.scope)
    replies = iter(["<answer>go to room 3</answer>", "<answer>take key</answer>"])
    model = lambda messages, tools, seed: ChatReply(next(replies))  # noqa: E731
    setup = EpisodeSetup(qwen_tokenizer, (), RolloutConfig(), policy_summaries=False)
    settings = AlfworldConfig(max_env_steps=3, max_replies_per_step=1)
    episode = GameEpisode(SUITE, Game("walk", None, "pick"), env, setup, settings, open_game=WalkGame)
    result = ChatDriver(model, None).play(episode.play())
    assert result.won
    return [record.query for record in env.stats.introspections]


@pytest.mark.parametrize("rag_query", ["task", "latest"])
def test_a_game_retrieves_by_its_goal_and_observation_or_by_the_latest_message(make_env, qwen_tokenizer, rag_query):
    queries = _play(make_env, qwen_tokenizer, rag_query)
    assert len(queries) == 2  # one retrieval before each step
    if rag_query == "task":  # the goal and what the game said, never the command list
        assert queries == [
            "You are in room 1. Your task is to: take the key.",
            "You are in room 1. Your task is to: take the key.\nYou are in room 3.",
        ]
    else:  # the latest message as the agent reads it: the step header and the commands too
        assert "Admissible commands: go to room 2, go to room 3" in queries[0]
        assert queries[1].startswith("[step 1/3]") and "take key" in queries[1]


def test_every_memory_variant_gets_the_same_protocol_and_the_run_records_it():
    config = load_config(AgeMemConfig, overrides=["eval.rag_top_k=4", "eval.rag_query=latest"])
    protocols = {variant: retrieval_protocol(apply_variant(config, variant)) for variant in ("rag", "mem0", "langmem")}
    assert set(map(str, protocols.values())) == {
        str({"top_k": 4, "query": "latest", "when": "before every agent step"})
    }
    assert retrieval_protocol(apply_variant(config, "agemem")) is None  # the agent retrieves by its own calls
    assert load_config(AgeMemConfig).eval.rag_query == "task"
