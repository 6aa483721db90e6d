"""ALFWorld as a task: one game is one episode, won -> task reward 1, else 0.

The game's first observation, with the task ("Your task is to: …"), arrives as the protected task message (Stage 3:
there is no Stage 1 or 2); the agent acts with ``<answer>COMMAND</answer>``, which is sent to the game, and may call
the memory tools between commands (the game waits). After every command the next observation arrives with the
admissible commands. A command that is not admissible changes nothing and costs the step (the agent is told so); a
step whose ``alfworld.max_replies_per_step`` replies all went to tools or format errors passes without a command.
At most ``alfworld.max_env_steps`` steps per game. When the game is over the agent is told whether it won and gets
``alfworld.debrief_replies`` replies to store what worked.

:class:`GameEpisode` plays a game for evaluation (``agemem eval alfworld``, :mod:`agemem.eval.alfworld`: one memory
scope across games) and, through the registered :data:`ALFWORLD` task, for training (``agemem train
data.source=alfworld``: each rollout in its own scope, the result turned into a :class:`Trajectory` and scored by
:class:`GameScorer`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.config import RewardConfig
from agemem.core.env import EpisodeStats, MemoryEnv
from agemem.rewards.base import Judge, RelevanceItem
from agemem.rewards.build import build_judge
from agemem.rewards.composite import mean_breakdown, reward_breakdown
from agemem.rollouts.driver import EpisodeFactory
from agemem.rollouts.engines.base import Completion
from agemem.rollouts.episode import Episode, EpisodeOverError, EpisodeSetup, GenerationRequest, Stages
from agemem.rollouts.records import EndedBy, Step, Trajectory
from agemem.rollouts.tasks import Task
from agemem.tasks.alfworld_games import Game, GameState, TextGame, discover_games, task_text
from agemem.tasks.base import register_task
from agemem.tasks.config import TaskRunConfig

if TYPE_CHECKING:
    from agemem.core.config import RolloutConfig
    from agemem.core.encoders import Encoder
    from agemem.tasks.config import AlfworldConfig

BENCHMARK = "alfworld"


# --------------------------------------------------------------------------------------------- the prompt


def game_system_prompt(
    tools: Sequence[str],
    tool_format: str,
    *,
    max_env_steps: int,
    auto_retrieval: bool = False,
    show_admissible: bool = True,
    debrief: bool = True,
) -> str:
    """The system message of an ALFWorld game for an agent offered ``tools``: the game, the memory it has, and
    the reply format (``{tools}`` marks where the schemas go in ``agemem`` tool format)."""
    listed = " and the commands that are admissible now" if show_admissible else ""
    paragraphs = [
        "You are an agent in a text-based household game (ALFWorld). Each game gives you a task, such as "
        '"put a clean mug in coffeemachine". You act by sending one game command at a time; the game replies with '
        f"what you observe{listed}. You have at most {max_env_steps} commands per game; a command that is not "
        "admissible does nothing and still counts."
    ]
    uses = {
        "Add_memory": "save what may help in later games (where things were, which commands solved a task) with "
        "Add_memory",
        "Update_memory": "correct entries with Update_memory",
        "Delete_memory": "remove wrong or stale ones with Delete_memory",
        "Retrieve_memory": "bring relevant ones back into view with Retrieve_memory, for example at the start of a "
        "game",
    }
    ltm = [use for name, use in uses.items() if name in tools]
    if ltm or auto_retrieval:
        text = "Long-term memory is a store that outlives each game: it persists across the games of this session."
        if ltm:
            listing = ltm[0] if len(ltm) == 1 else ", ".join(ltm[:-1]) + ", and " + ltm[-1]
            text += " " + listing[0].upper() + listing[1:] + "."
        if auto_retrieval:
            text += (
                " Before each of your replies, the memories most related to the latest message are retrieved for "
                "you and shown as a tool message."
            )
        paragraphs.append(text)
    stm = [
        use
        for name, use in (
            ("Summary_context", "compress them with Summary_context"),
            ("Filter_context", "remove them with Filter_context"),
        )
        if name in tools
    ]
    if stm:
        paragraphs.append(
            "Short-term memory is this conversation, and it grows with every step. When it fills up with "
            f"observations you no longer need, {' or '.join(stm)}. The system message and the task are never removed."
        )
    command = "<answer>one game command, e.g. go to countertop 1</answer>"
    if tools:
        reply = (
            "Each reply has this shape:\n<think>your private reasoning</think>\nfollowed by exactly one of\n"
            '<tool_call>[{"name": "<tool name>", "arguments": {...}}, ...]</tool_call>\n'
            "to use tools (their results come back in the next message; the game waits), or\n"
            f"{command}\nto act in the game. Never put a tool call and a command in the same reply, and write "
            "nothing outside the tags."
        )
        if debrief and "Add_memory" in tools:
            reply += (
                " When the game is over you are told whether you completed the task; store what you learned, then "
                "reply with <answer>done</answer>."
            )
    else:
        reply = f"Each reply has this shape:\n<think>your private reasoning</think>\n{command}\n"
        reply += "Write nothing outside the tags."
    paragraphs.append(reply)
    prompt = "\n\n".join(paragraphs)
    if not tools:
        return prompt
    if tool_format == "agemem":
        return prompt + "\n\nAvailable tools (JSON schemas):\n{tools}"
    return prompt + "\n\nYour tools are listed below. You may put each call in its own <tool_call> block."


# --------------------------------------------------------------------------------------------- one game


_SPACES = re.compile(r"\s+")


def normalize_command(text: str) -> str:
    """The command an ``<answer>`` names: lower case, single spaces, without quotes, a leading ``>`` or a final
    full stop (``"Go to Desk 1."`` → ``go to desk 1``)."""
    command = _SPACES.sub(" ", text).strip().strip("\"'`").strip()
    return command.removeprefix(">").strip().rstrip(".!").strip().lower()


@dataclass
class GameResult:
    """What one game did (the per-game record is :func:`example_record`)."""

    game: Game
    task: str
    """the "Your task is to: …" sentence."""
    won: bool
    env_steps: int
    invalid: int
    """inadmissible commands sent (each cost a step)."""
    no_action: int
    """steps whose replies all went to tools or format errors."""
    ended_by: str
    """won, step_limit, prompt_too_long, engine_error or env_error."""
    steps: list[Step]
    """every LLM call, in order (agent replies and policy-written summaries)."""
    stats: EpisodeStats
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """one entry per environment step: the command (None when none was given), whether it was admissible, and
    what the game said."""
    error: str | None = None


class GameError(Exception):
    """The game engine failed (ends the game as env_error; the run goes on)."""


class GameEpisode(Episode):
    """One ALFWorld game as a generator of generation requests (the driver protocol of
    :class:`agemem.rollouts.episode.Episode`, whose reply, summary and prompt-cap handling it reuses):
    ``result = yield from GameEpisode(...).play()``."""

    def __init__(
        self,
        game: Game,
        env: MemoryEnv,
        setup: EpisodeSetup,
        settings: AlfworldConfig,
        open_game: Callable[[Game], TextGame] = TextGame,
        *,
        task: Task | None = None,
        rollout_index: int = 0,
    ):
        task = task or game_task(game)
        super().__init__(task, [], env, setup, rollout_index=rollout_index)
        self.game = game
        self.settings = settings
        self.open_game = open_game
        self.transcript: list[dict[str, Any]] = []

    def play(self) -> Generator[GenerationRequest, Completion, GameResult]:  # type: ignore[override]
        env, settings = self.env, self.settings
        env.set_stage(3)  # a game is all task stage: TN and the step records count it as Stage 3
        won, steps, invalid, idle, ended_by, error = False, 0, 0, 0, "step_limit", None
        world: TextGame | None = None
        try:
            world = self._world(lambda: self.open_game(self.game))
            state = self._world(world.reset)
            self.task.question = task_text(state.observation)
            env.add_user(self._with_commands(state.observation, state), question=True)
            said = state.observation
            while steps < settings.max_env_steps and not won:
                command = yield from self._command(turn=steps)
                steps += 1
                header = f"[step {steps}/{settings.max_env_steps}]"
                admissible = False
                if command is None:
                    idle += 1
                    said = (
                        f"No command in {settings.max_replies_per_step} replies: the step passed without an action. "
                        "Act with <answer>command</answer>."
                    )
                elif command not in state.admissible:
                    invalid += 1
                    said = f'Nothing happens: "{command}" is not an admissible command; write one exactly as listed.'
                else:
                    state = self._world(lambda command=command: world.step(command))  # type: ignore[union-attr]
                    won, said, admissible = state.won, state.observation, True
                self.transcript.append({"command": command, "admissible": admissible, "observation": said})
                # a memory system is handed what happened (not the command list): a command and its result
                observed = f'Task "{self.task.question}": "{command}" -> {said}' if admissible else ""
                if not won and steps < settings.max_env_steps:
                    env.add_user(self._with_commands(f"{header} {said}", state), kind="observation", observed=observed)
                else:
                    env.observe(observed)  # the last command (the winning one, say) is remembered too
            ended_by = "won" if won else "step_limit"
            env.observe(self._outcome(won, steps))  # a memory system keeps the game's outcome for later games
            if settings.debrief_replies and "Add_memory" in env.offered:
                try:
                    yield from self._debrief(won, steps, said)
                except EpisodeOverError as over:  # the game is decided; the debrief just stops
                    error = f"debrief: {over.error}"
        except EpisodeOverError as over:
            ended_by, error = over.reason, over.error
        except GameError as failure:
            ended_by, error = "env_error", str(failure)
        finally:
            if world is not None:
                world.close()
        return GameResult(
            self.game,
            self.task.question,
            won,
            steps,
            invalid,
            idle,
            ended_by,
            self.steps,
            env.stats,
            self.transcript,
            error,
        )

    def _command(self, turn: int) -> Generator[GenerationRequest, Completion, str | None]:
        """Agent replies until one gives a command (``<answer>``), at most ``max_replies_per_step``."""
        for _ in range(self.settings.max_replies_per_step):
            result = yield from self._act(3, turn)
            if result.done:
                return normalize_command(result.answer or "")
        self.limit_hits.append({"stage": 3, "turn": turn, "limit": "turn"})
        return None

    def _outcome(self, won: bool, steps: int) -> str:
        task = self.task.question
        if won:
            return f'You completed the task "{task}" in {steps} steps.'
        return f'The task "{task}" was not completed within {self.settings.max_env_steps} steps.'

    def _debrief(self, won: bool, steps: int, said: str) -> Generator[GenerationRequest, Completion, None]:
        """Tell the agent how the game ended and let it store what worked (its ``<answer>`` ends the game)."""
        outcome = self._outcome(won, steps)
        self.env.add_user(
            f"{said}\n\nThe game is over. {outcome} Store what may help in later games with your memory tools, then "
            "reply with <answer>done</answer>.",
            kind="debrief",
        )
        for _ in range(self.settings.debrief_replies):
            result = yield from self._act(3, steps)
            if result.done:
                return

    def _with_commands(self, text: str, state: GameState) -> str:
        if not self.settings.show_admissible:
            return text
        return f"{text}\n\nAdmissible commands: {', '.join(state.admissible)}"

    def _world(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as err:  # a broken game file or engine ends this game, not the run
            raise GameError(f"{self.game.id}: {type(err).__name__}: {err}") from err


# --------------------------------------------------------------------------------------------- the task


def game_task(game: Game) -> Task:
    """A game as a task record (serialisable: the game file and type ride in the metadata)."""
    metadata = {"benchmark": BENCHMARK, "task_type": game.task_type, "game_file": str(game.path)}
    return Task(game.id, "", "", [], [], metadata)


def task_game(task: Task) -> Game:
    """The game a :func:`game_task` record stands for."""
    return Game(task.id, Path(task.metadata["game_file"]), task.metadata["task_type"])


GAME_ENDINGS: dict[str, EndedBy] = {
    "won": "answer",
    "step_limit": "round_limit",
    "prompt_too_long": "prompt_too_long",
    "engine_error": "engine_error",
    "env_error": "engine_error",
}
"""a game's ending as a trajectory's ``ended_by`` (the game's own is kept in ``meta["game_ended_by"]``)."""


def game_trajectory(result: GameResult, episode: GameEpisode) -> Trajectory:
    """A finished game as a trajectory: ``meta["won"]`` is what :class:`GameScorer` rewards."""
    env = episode.env
    commands = [entry["command"] for entry in result.transcript if entry["command"] is not None]
    return Trajectory(
        task_id=episode.task.id,
        rollout_index=episode.rollout_index,
        question=result.task,
        gold_answer="",
        steps=result.steps,
        answer=commands[-1] if commands else None,
        ended_by=GAME_ENDINGS.get(result.ended_by, "engine_error"),
        stats=result.stats,
        final_memory=[e.to_json() for e in env.ltm.entries(scope=env.scope)],
        limit_hits=episode.limit_hits,
        error=result.error,
        meta={
            "benchmark": BENCHMARK,
            "task_type": result.game.task_type,
            "won": result.won,
            "env_steps": result.env_steps,
            "invalid": result.invalid,
            "no_action": result.no_action,
            "game_ended_by": result.ended_by,
            "transcript": result.transcript,
        },
    )


@dataclass
class GameScorer:
    """R_task = 1 when the game was won, else 0; the context terms, the memory terms that apply (maintenance, and
    the judge's relevance of the agent's retrievals to the game's task; no Stage-1 storage in a game) and the
    penalties as for QA tasks (``agemem.rewards.composite.reward_breakdown``)."""

    judge: Judge
    config: RewardConfig
    token_budget: int

    def __call__(self, trajectories: Sequence[Trajectory], tasks: Sequence[Task]) -> list[dict[str, float]]:
        items = [RelevanceItem(t.question, tuple(r.contents)) for t in trajectories for r in t.stats.retrievals]
        relevance = iter(self.judge.relevance_scores(items))
        breakdowns = []
        for trajectory in trajectories:
            retrieval_scores = [next(relevance) for _ in trajectory.stats.retrievals]
            won = 1.0 if trajectory.meta.get("won") else 0.0
            breakdown = reward_breakdown(trajectory, won, [], retrieval_scores, self.config, self.token_budget)
            breakdown["alfworld/won"] = won
            trajectory.reward = breakdown
            breakdowns.append(breakdown)
        return breakdowns

    def report(self, breakdowns: Sequence[Mapping[str, float]]) -> dict[str, Any]:
        return {"rewards": mean_breakdown(breakdowns), "judge": {"name": self.judge.name}}


def game_config(config: TaskRunConfig) -> TaskRunConfig:
    """``config`` with the ALFWorld system prompt for its tools, unless ``env.system_prompt`` names one already."""
    if config.env.system_prompt:
        return config
    settings = config.alfworld
    prompt = game_system_prompt(
        config.env.tools,
        config.env.tool_format,
        max_env_steps=settings.max_env_steps,
        auto_retrieval=config.env.rag_top_k > 0,
        show_admissible=settings.show_admissible,
        debrief=settings.debrief_replies > 0,
    )
    return replace(config, env=replace(config.env, system_prompt=prompt))


@dataclass(frozen=True)
class AlfworldTask:
    """ALFWorld games of ``alfworld.split`` under ``alfworld.data_dir`` (``alfworld.limit``, then ``data.limit``)."""

    name: str = BENCHMARK
    uses_distractors: bool = False

    def accepts(self, source: str) -> bool:
        return False

    def configure(self, config: TaskRunConfig) -> TaskRunConfig:
        return game_config(config)

    def load(self, config: TaskRunConfig) -> list[Task]:
        settings = config.alfworld
        games = discover_games(settings.data_dir, settings.split)
        return [game_task(game) for game in (games[: settings.limit] if settings.limit else games)]

    def stages(self, task: Task, distractors: list[str], rollout: RolloutConfig) -> Stages:
        """No Stage 1 or 2; Stage 3 is the game (its first observation, then one per command)."""
        return Stages([], [], task.question)

    def episodes(self, config: TaskRunConfig) -> EpisodeFactory:
        settings = config.alfworld

        def play(
            task: Task, distractors: list[str], env: MemoryEnv, setup: EpisodeSetup, rollout_index: int
        ) -> Generator[GenerationRequest, Completion, Trajectory]:
            episode = GameEpisode(task_game(task), env, setup, settings, task=task, rollout_index=rollout_index)
            result = yield from episode.play()
            return game_trajectory(result, episode)

        return play

    def scorer(self, config: TaskRunConfig, encoder: Encoder | None) -> GameScorer:
        judge = build_judge(config.reward.judge, encoder)
        return GameScorer(judge, config.reward, config.env.context.max_context_tokens)


ALFWORLD = register_task(AlfworldTask())
