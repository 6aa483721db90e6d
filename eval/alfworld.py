"""`agemem eval alfworld`: ALFWorld games played by a memory agent, scored by success rate.

The harness is the text games' (:mod:`agemem.eval.games`, over :class:`agemem.tasks.games.GameEpisode`) with
ALFWorld's suite (:data:`agemem.tasks.alfworld.SUITE`): the game's first observation, with the task ("Your task is
to: …"), arrives as the protected task message; the agent acts with ``<answer>COMMAND</answer>`` and may call the
memory tools between commands. A command that is not admissible changes nothing and costs the step; at most
``alfworld.max_env_steps`` (50) steps per game; then ``alfworld.debrief_replies`` replies to store what worked.
Long-term memory is one scope (``alfworld``) for the whole run; resume restarts after the last finished chunk with
the memory as it was.

Per run (``results.json``): SR = 100 · the share of games won, overall and per task type (``SR_type``); ``steps``,
``steps_won``, ``invalid``, ``no_action``, TN, TC, cost and ``memory`` as for every text game
(:mod:`agemem.eval.games`).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.eval.config import EvalRunConfig
from agemem.eval.games import (  # noqa: F401  (the harness's pieces, re-exported under their ALFWorld names)
    GameBenchmark,
    Games,
    GameSession,
    evaluate_games,
    example_record,
    play_batch,
    resume_point,
    snapshot_path,
    snapshots,
)
from agemem.eval.variants import apply_variant
from agemem.tasks.alfworld import (  # noqa: F401  (game_system_prompt, normalize_command: re-exported)
    BENCHMARK,
    SUITE,
    GameEpisode,
    GameResult,
    game_system_prompt,
    normalize_command,
)
from agemem.tasks.alfworld import game_config as with_game_prompt
from agemem.tasks.alfworld_games import Game
from agemem.tasks.games import load_games as load_suite_games

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.eval.models import Backend

MEMORY_SCOPE = BENCHMARK
"""the one long-term memory scope of a run: every game reads and writes it."""


def game_config(config: EvalRunConfig, variant: str) -> EvalRunConfig:
    """``config`` set up for ``variant`` (its tools and retrieval, :func:`agemem.eval.variants.apply_variant`) with the
    ALFWorld system prompt, unless ``env.system_prompt`` names one already."""
    configured = with_game_prompt(apply_variant(config, variant))
    assert isinstance(configured, EvalRunConfig)
    return configured


class ALFWorld(GameBenchmark):
    """`agemem eval alfworld` (:class:`agemem.eval.runner.Benchmark`)."""

    def __init__(self) -> None:
        super().__init__(SUITE)


def load_games(config: EvalRunConfig) -> list[Game]:
    """The games of ``alfworld.split`` (round-robin over task types), the first ``alfworld.limit`` of them."""
    return load_suite_games(config, SUITE)  # type: ignore[return-value]


def evaluate_alfworld(
    config: EvalRunConfig,
    out: str | Path,
    *,
    backends: dict[str, Backend] | None = None,
    encoder: Encoder | None = None,
) -> list[dict[str, Any]]:
    """Evaluate every model of ``eval.models`` under every ``eval.variants`` on the games of ``alfworld.split``
    (:func:`agemem.eval.games.evaluate_games`)."""
    return evaluate_games(BENCHMARK, config, out, backends=backends, encoder=encoder)
