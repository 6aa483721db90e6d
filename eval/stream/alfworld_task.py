"""ALFWorld as a stream (TraceRetain's setting), on the games and text engine of :mod:`agemem.tasks.alfworld`.

* items: the solvable games of ``alfworld.split`` under ``alfworld.data_dir`` (round-robin over the six task
  types), in that order;
* query: the task sentence, written from the game's ALFRED parameters (``traj_data.json``) in ALFWorld's
  words, e.g. ``put a clean butterknife in countertop`` (the game's own text may choose other wording, "put some
  … on …"; the agent sees that text in the game's first observation);
* task key: the normalised task type, object and receptacle (same key = same task, for Precision@k);
* execution: the action trajectory, one ``> command`` line and the game's reply per environment step, then
  ``Outcome: done`` or ``Outcome: not done``;
* strict: the game reports the task won;
* ground truth: the planner's solution (``agemem.tasks.alfworld.expert_plan``), computed only when needed (the
  initial bank, error-free replay).

One game is played as `agemem eval alfworld` plays it (its system prompt and command normalisation; at most
``alfworld.max_env_steps`` commands, ``alfworld.max_replies_per_step`` replies per command, an inadmissible
command costs the step), with the retrieved records in the first message; with the policy addition the agent may
call Add_memory / Delete_memory between commands and in a memory turn after the game. ReMem
(:mod:`agemem.eval.stream.remem`) thinks and refines its memory between commands, within the replies per command.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agemem.core.prompts import system_prompt, template_tools
from agemem.eval.stream.agent import Dialogue, memory_turn_message, task_message
from agemem.eval.stream.base import Attempt, Demonstration
from agemem.eval.stream.config import StreamRunConfig
from agemem.eval.stream.remem import GAME_ACT, GAME_ACT_EFFECT, ReMemDialogue, ReMemSession, remem_system_prompt
from agemem.tasks.alfworld import AlfworldConfig
from agemem.tasks.stream import StreamItem, game_execution

if TYPE_CHECKING:
    from agemem.eval.stream.base import MemoryTools
    from agemem.rollouts.engines.chat import ChatModel
    from agemem.tasks.alfworld import AlfworldGame, Game, GameState


@dataclass
class AlfworldStreamTask:
    source: list[StreamItem]
    settings: AlfworldConfig
    tool_format: str = "agemem"
    open_game: Callable[[Game], AlfworldGame] | None = None
    """how a game is opened (default: :class:`agemem.tasks.alfworld.AlfworldGame`)."""
    name: str = "alfworld"

    def items(self) -> list[StreamItem]:
        return list(self.source)

    def play(
        self,
        item: StreamItem,
        demos: Sequence[Demonstration],
        model: ChatModel,
        tools: MemoryTools | None,
        seed: int | None,
    ) -> Attempt:
        from agemem.tasks.alfworld import SUITE, AlfworldGame
        from agemem.tasks.games import (
            game_system_prompt,
            inadmissible_text,
            no_command_text,
            normalize_command,
            step_header,
        )

        settings = self.settings
        offered = tools.offered if tools is not None else ()
        remem = tools if isinstance(tools, ReMemSession) else None
        prompt = game_system_prompt(
            SUITE,
            () if remem else offered,
            self.tool_format,
            max_env_steps=settings.max_env_steps,
            show_admissible=settings.show_admissible,
            debrief=tools is not None,
        )
        if remem is not None:  # the game's own description (the first paragraph); ReMem's replaces its reply format
            intro = prompt.split("\n\n", 1)[0]
            prompt = remem_system_prompt(intro, GAME_ACT, GAME_ACT_EFFECT, self.tool_format, remem.budget)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system_prompt(self.tool_format, prompt, offered)}  # type: ignore[arg-type]
        ]
        schemas = template_tools(self.tool_format, offered)  # type: ignore[arg-type]
        if remem is not None:
            dialogue: Dialogue = ReMemDialogue(model, messages, offered, remem, schemas, seed, decision="this command")
        else:
            dialogue = Dialogue(model, messages, offered, tools, schemas, seed)
        lines: list[str] = []
        won, error = False, None
        opened = (self.open_game or AlfworldGame)(item.payload)
        try:
            state = opened.reset()
            messages.append({"role": "user", "content": task_message(self._shown(state.observation, state), demos)})
            steps = 0
            while steps < settings.max_env_steps and not won:
                parsed = dialogue.until_answer(settings.max_replies_per_step)
                if dialogue.error is not None:
                    break
                command = normalize_command(parsed.answer) if parsed is not None and parsed.answer else None
                steps += 1
                if command is None:
                    said = no_command_text(settings.max_replies_per_step)
                elif command not in state.admissible:
                    said = inadmissible_text(command)
                else:
                    state = opened.step(command)
                    won, said = state.won, state.observation
                lines.append(f"> {command or '(no command)'}\n{said}")
                if not won and steps < settings.max_env_steps:
                    shown = f"{step_header(steps, settings.max_env_steps)} {said}"
                    messages.append({"role": "user", "content": self._shown(shown, state)})
        except Exception as err:  # a broken game ends this task, not the stream
            error = f"{item.id}: {type(err).__name__}: {err}"
        finally:
            opened.close()
        execution = game_execution(lines, won)
        if tools is not None and remem is None and dialogue.error is None and error is None:
            outcome = "The task was completed." if won else "The task was not completed."
            messages.append({"role": "user", "content": memory_turn_message(execution, outcome)})
            dialogue.until_answer(settings.max_replies_per_step)
        return Attempt(
            execution,
            None,
            won,
            dialogue.calls,
            dialogue.prompt_tokens,
            dialogue.transcript,
            dialogue.error or error,
        )

    def strict(self, item: StreamItem, attempt: Attempt) -> float:
        return 1.0 if attempt.won else 0.0

    def failed_execution(self, item: StreamItem, rng: random.Random) -> str:
        """A trajectory that wanders and stops at the step limit: a few visits, no success."""
        places = [item.metadata.get("receptacle") or "countertop", "drawer", "cabinet", "shelf", "table"]
        lines = []
        for _ in range(rng.randint(2, 4)):
            place = f"{rng.choice(places)} {rng.randint(1, 4)}"
            lines.append(f"> go to {place}\nYou arrive at {place}. You see nothing useful.")
        return game_execution(lines, won=False)

    def _shown(self, text: str, state: GameState) -> str:
        from agemem.tasks.games import with_commands

        return with_commands(text, state.admissible) if self.settings.show_admissible else text


def game_stream(config: StreamRunConfig, name: str, items: list[StreamItem]) -> AlfworldStreamTask:
    """The game stream ``name`` over ``items`` (each a game of the suite in its ``payload``)."""
    from agemem.tasks.games import game_settings, get_suite

    settings = game_settings(config, get_suite(name))
    assert isinstance(settings, AlfworldConfig), "only ALFWorld streams as a game so far"
    return AlfworldStreamTask(items, settings, config.env.tool_format, name=name)
