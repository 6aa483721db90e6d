"""The tasks' own sections, and the root of `agemem rollout`: the shared sections plus every task's settings.

A task whose episodes need settings beyond ``data`` (ALFWorld: the game's step budget, the split) keeps them in a
section here; every root that plays tasks (rollout, train, eval, stream) extends :class:`TaskRunConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agemem.core.config import AgentConfig
from agemem.core.configlib import ConfigError


@dataclass
class AlfworldConfig:
    """ALFWorld games (`agemem eval alfworld`, and training with data.source=alfworld): environment commands and the
    memory tools."""

    data_dir: str = ""
    """folder holding json_2.1.1/<split>/<task>/<trial>/game.tw-pddl (the CLI's --data-dir); empty: $ALFWORLD_DATA,
    else ~/.cache/alfworld (where `alfworld-download` puts the games)."""
    split: Literal["valid_seen", "valid_unseen"] = "valid_seen"
    """the evaluation split: valid_seen (140 games, rooms seen in training) or valid_unseen (134 games, new rooms)."""
    limit: int = 0
    """play the first N games (ordered round-robin over the six task types); 0 = all."""
    max_env_steps: int = 50
    """environment steps per game (commands sent, inadmissible ones and replies without a command included)."""
    max_replies_per_step: int = 3
    """agent replies per environment step: memory-tool calls and format errors take a reply; when they are spent
    without a command, the step passes with no action."""
    debrief_replies: int = 2
    """agent replies after a game ends (told whether it won), to store what worked; 0 = none. Only when
    Add_memory is offered."""
    show_admissible: bool = True
    """list the admissible commands after every observation (as ALFWorld's text agents see them)."""

    def validate(self) -> None:
        if self.limit < 0 or self.debrief_replies < 0:
            raise ConfigError(f"limit={self.limit} and debrief_replies={self.debrief_replies} must be >= 0")
        if self.max_env_steps < 1 or self.max_replies_per_step < 1:
            raise ConfigError(
                f"max_env_steps={self.max_env_steps} and max_replies_per_step={self.max_replies_per_step} must be >= 1"
            )


@dataclass
class TaskRunConfig(AgentConfig):
    """`agemem rollout`'s root: the shared sections plus the tasks' own."""

    alfworld: AlfworldConfig = field(default_factory=AlfworldConfig)
    """ALFWorld games (data.source=alfworld, `agemem eval alfworld`, `agemem eval stream --task alfworld`)."""
