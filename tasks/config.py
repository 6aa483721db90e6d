"""The tasks' own sections, and the root of `agemem rollout`: the shared sections plus every task's settings.

A task whose episodes need settings beyond ``data`` (a text game: its step budget, its split) keeps them in a
section here; every root that plays tasks (rollout, train, eval, stream) extends :class:`TaskRunConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from agemem.core.config import AgentConfig
from agemem.core.configlib import ConfigError


@dataclass
class GameConfig:
    """What every text game shares (ALFWorld, SciWorld, PDDL, BabyAI: :mod:`agemem.tasks.games`): the episode's
    budget, the reply budget per step, the debrief and what the agent is shown. Each game's section extends it."""

    limit: int = 0
    """play the first N games of the split (round-robin over the task types: a prefix is balanced); 0 = all."""
    task_types: list[str] = field(default_factory=list)
    """play only the games of these task types (e.g. [blocksworld] for PDDL); empty = all. Applied before limit."""
    max_env_steps: int = 50
    """environment steps per game (commands sent, invalid ones and replies without a command included)."""
    max_replies_per_step: int = 3
    """agent replies per environment step: memory-tool calls and format errors take a reply; when they are spent
    without a command, the step passes with no action."""
    debrief_replies: int = 2
    """agent replies after a game ends (told whether it won), to store what worked; 0 = none. Only when
    Add_memory is offered."""
    show_admissible: bool = True
    """list the valid actions after every observation, as the game provides them."""
    max_live_games: int = 0
    """games an evaluation plays side by side at most (0: eval.chunk_size); memory is shared as within a chunk."""

    def validate(self) -> None:
        if self.limit < 0 or self.debrief_replies < 0 or self.max_live_games < 0:
            raise ConfigError(
                f"limit={self.limit}, debrief_replies={self.debrief_replies} and max_live_games={self.max_live_games} "
                "must be >= 0"
            )
        if self.max_env_steps < 1 or self.max_replies_per_step < 1:
            raise ConfigError(
                f"max_env_steps={self.max_env_steps} and max_replies_per_step={self.max_replies_per_step} must be >= 1"
            )


@dataclass
class AlfworldConfig(GameConfig):
    """ALFWorld games (`agemem eval alfworld`, and training with data.source=alfworld): environment commands and the
    memory tools."""

    data_dir: str = ""
    """folder holding json_2.1.1/<split>/<task>/<trial>/game.tw-pddl (the CLI's --data-dir); empty: $ALFWORLD_DATA,
    else ~/.cache/alfworld (where `alfworld-download` puts the games)."""
    split: Literal["valid_seen", "valid_unseen"] = "valid_seen"
    """the evaluation split: valid_seen (140 games, rooms seen in training) or valid_unseen (134 games, new rooms)."""


# ---- SciWorld (agemem.tasks.sciworld) ----
@dataclass
class SciworldConfig(GameConfig):
    """ScienceWorld tasks (`agemem eval sciworld`, data.source=sciworld)."""

    max_env_steps: int = 30
    """environment steps per task (AgentBoard's budget)."""
    max_live_games: int = 4
    """games an evaluation plays side by side at most: each live game holds a simulator, a JVM of about 2.5 GB."""
    variations_per_task: int = 3
    """test variations played per task, 1-3 (the first ones of agemem.tasks.sciworld.SPLIT); 3 = all 90 games."""
    simplifications: str = "selfWateringFlowerPots,openContainers,openDoors,noElectricalAction"
    """ScienceWorld simplifications, comma-separated (default: AgentBoard's; the electrical tasks always keep their
    `connect` actions, so noElectricalAction skips them); empty = none."""

    def validate(self) -> None:
        super().validate()
        if not 1 <= self.variations_per_task <= 3:
            raise ConfigError(
                f"sciworld.variations_per_task={self.variations_per_task} must be 1, 2 or 3 (the split holds 3 test "
                "variations per task; use limit to play fewer games)"
            )
        known = ("selfWateringFlowerPots", "openContainers", "openDoors", "noElectricalAction", "teleportAction")
        unknown = [name for name in self.simplifications.split(",") if name and name not in known]
        if unknown:
            raise ConfigError(
                f"sciworld.simplifications has unknown {', '.join(unknown)}: use a comma-separated subset of "
                f"{','.join(known)} (case-sensitive, no spaces), or an empty string for none"
            )


# ---- PDDL (agemem.tasks.pddl) ----
@dataclass
class PddlConfig(GameConfig):
    """PDDL planning problems played as text games (`agemem eval pddl`, data.source=pddl)."""

    max_env_steps: int = 30
    """environment steps per problem (AgentBoard's budget)."""
    problems_dir: str = ""
    """folder holding <domain>/domain.pddl and its problems <domain>/pNN.pddl; empty: the bundled 60 problems
    (agemem/tasks/pddl/problems, written by `python -m agemem.tasks.pddl generate`). pddl.task_types picks
    domains."""


# ---- BabyAI (agemem.tasks.babyai) ----
@dataclass
class BabyaiConfig(GameConfig):
    """BabyAI levels as text games (`agemem eval babyai`, data.source=babyai)."""

    max_env_steps: int = 30
    """environment steps per episode (AgentBoard's budget)."""
    first_seed: int = 1234
    """the first seed of every level (AgentBoard's 1234); another value gives other layouts of the same 28 levels,
    e.g. a training split disjoint from the evaluation one."""
    episodes_per_level: int = 4
    """seeds per level: 4 gives AgentBoard's 112 episodes (28 levels x 4)."""
    go_to_actions: bool = True
    """offer `go to X` (walk to a visible object and face it, as AgentBoard does) besides the primitive actions;
    false: turn left / turn right / move forward and the actions on the object in front only."""

    def validate(self) -> None:
        super().validate()
        if self.first_seed < 0:
            raise ConfigError(f"babyai.first_seed={self.first_seed} must be >= 0 (AgentBoard's split starts at 1234)")
        if self.episodes_per_level < 1:
            raise ConfigError(
                f"babyai.episodes_per_level={self.episodes_per_level} must be >= 1 (4 gives AgentBoard's 112 games)"
            )


@dataclass
class TaskRunConfig(AgentConfig):
    """`agemem rollout`'s root: the shared sections plus the tasks' own."""

    alfworld: AlfworldConfig = field(default_factory=AlfworldConfig)
    """ALFWorld games (data.source=alfworld, `agemem eval alfworld`, `agemem eval stream --task alfworld`)."""
    sciworld: SciworldConfig = field(default_factory=SciworldConfig)
    """ScienceWorld tasks (data.source=sciworld, `agemem eval sciworld`)."""
    pddl: PddlConfig = field(default_factory=PddlConfig)
    """PDDL problems (data.source=pddl, `agemem eval pddl`)."""
    babyai: BabyaiConfig = field(default_factory=BabyaiConfig)
    """BabyAI levels (data.source=babyai, `agemem eval babyai`)."""
