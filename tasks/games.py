"""Text games as episodes and as training tasks: one :class:`GameEpisode` for every :class:`GameSuite`.

A game's first observation, with the goal, arrives as the protected task message (Stage 3: there is no Stage 1 or
2); the agent acts with ``<answer>COMMAND</answer>``, which is sent to the game, and may call the memory tools
between commands (the game waits). After every command the next observation arrives with the valid actions. A
command the game does not accept changes nothing and costs the step (the agent is told so); a step whose
``max_replies_per_step`` replies all went to tools or format errors passes without a command. The game ends when
it is won, when the environment ends it (``GameState.over``), or after ``max_env_steps`` steps. The agent is then
told how it went and gets ``debrief_replies`` replies to store what worked.

The settings are the suite's config section (``config.<suite.name>``, a :class:`~agemem.tasks.textgame.GameConfig`).
:class:`GameEpisode` plays a game for evaluation (``agemem eval NAME``, :mod:`agemem.eval.games`: one memory scope
across games) and, through the task each :func:`register_suite` registers, for training (``agemem train
data.source=NAME``: each rollout in its own scope, the result turned into a :class:`Trajectory` and scored by
:class:`GameScorer`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.core.env import EpisodeStats, MemoryEnv
from agemem.rewards.base import Judge, RelevanceItem
from agemem.rewards.build import build_judge
from agemem.rewards.composite import mean_breakdown, reward_breakdown
from agemem.rewards.config import RewardConfig
from agemem.rollouts.driver import EpisodeFactory
from agemem.rollouts.engines.base import Completion
from agemem.rollouts.episode import Episode, EpisodeOverError, EpisodeSetup, GenerationRequest, Stages
from agemem.rollouts.records import EndedBy, Step, Task, Trajectory
from agemem.tasks.base import Evaluation, register_task, unregister_task
from agemem.tasks.textgame import GameConfig, GameRef, GameState, GameSuite, TextGame

if TYPE_CHECKING:
    from agemem.core.encoders import Encoder
    from agemem.rollouts.config import RolloutConfig
    from agemem.tasks.config import TaskRunConfig
    from agemem.tasks.stream import StreamSpec


# --------------------------------------------------------------------------------------------- what a game says


def step_header(step: int, limit: int) -> str:
    """The marker before each observation after the first: ``[step 3/50]``."""
    return f"[step {step}/{limit}]"


def no_command_text(replies: int) -> str:
    """What the agent hears after ``replies`` replies without a command: the step passed."""
    return f"No command in {replies} replies: the step passed without an action. Act with <answer>command</answer>."


def inadmissible_text(command: str) -> str:
    """What the agent hears for a command outside the admissible list: nothing happens, the step is spent."""
    return f'Nothing happens: "{command}" is not an admissible command; write one exactly as listed.'


def with_commands(text: str, admissible: Sequence[str], *, strict: bool = True) -> str:
    """``text`` followed by the commands the game accepts now (nothing when there are none): "Admissible commands"
    for a strict list, "Valid actions" for guidance (a suite whose game decides itself)."""
    if not admissible:
        return text
    label = "Admissible commands" if strict else "Valid actions"
    return f"{text}\n\n{label}: {', '.join(admissible)}"


# --------------------------------------------------------------------------------------------- the suites


_SUITES: dict[str, GameSuite] = {}


def register_suite(suite: GameSuite, *, replace: bool = False) -> GameSuite:
    """Make ``suite`` a training task (``data.source=<name>``) and an evaluation (``agemem eval <name>``, through
    :mod:`agemem.eval.games`); a second, different suite of the same name is refused unless ``replace``."""
    known = _SUITES.get(suite.name)
    if known is not None and known is not suite and not replace:
        raise ValueError(f"a game suite named {suite.name!r} is registered already; pass replace=True to swap it")
    _SUITES[suite.name] = suite
    register_task(GameTask(suite), replace=True)
    return suite


def unregister_suite(name: str) -> None:
    _SUITES.pop(name, None)
    unregister_task(name)


def suite_names() -> list[str]:
    return sorted(_SUITES)


def get_suite(name: str) -> GameSuite:
    try:
        return _SUITES[name]
    except KeyError:
        raise ConfigError(
            f"no text game named {name!r}; known: {', '.join(suite_names())}. To fix: pick one of them, or register "
            "yours with agemem.tasks.games.register_suite(suite) in a plugin module (--plugin MODULE)"
        ) from None


def game_settings(config: TaskRunConfig, suite: GameSuite) -> GameConfig:
    """The suite's config section (``config.<suite.name>``); a root composed without it (built before the suite
    registered, or in code) plays the section's defaults, since no file or override could have set it."""
    settings = getattr(config, suite.name, None)
    if settings is None:
        return suite.settings()
    if not isinstance(settings, suite.settings):
        raise ConfigError(
            f"config.{suite.name} is a {type(settings).__name__}, but the {suite.name!r} game reads a "
            f"{suite.settings.__name__}; a task's section is its suite's settings class (GameSuite.settings)"
        )
    return settings


def load_games(config: TaskRunConfig, suite: GameSuite) -> list[GameRef]:
    """The games of the suite's configured split: those of ``<name>.task_types`` (all when empty), the first
    ``<name>.limit`` of them."""
    settings = game_settings(config, suite)
    games = list(suite.discover(settings))
    if settings.task_types:
        unknown = sorted(set(settings.task_types) - set(suite.task_types))
        if unknown:
            raise ConfigError(
                f"{suite.name}.task_types names {', '.join(unknown)}, which {suite.title} does not have; choose from "
                f"{', '.join(suite.task_types)}"
            )
        games = [game for game in games if game.task_type in settings.task_types]
    return games[: settings.limit] if settings.limit else games


# --------------------------------------------------------------------------------------------- the prompt


def game_system_prompt(
    suite: GameSuite,
    tools: Sequence[str],
    tool_format: str,
    *,
    max_env_steps: int,
    auto_retrieval: bool = False,
    show_admissible: bool = True,
    debrief: bool = True,
) -> str:
    """The system message of a game for an agent offered ``tools``: the game (``suite.world``), the memory it
    has, and the reply format (``{tools}`` marks where the schemas go in ``agemem`` tool format)."""
    listed = " and the commands that are admissible now" if show_admissible else ""
    paragraphs = [
        f"{suite.world} You act by sending one game command at a time; the game replies with what you observe"
        f"{listed}. You have at most {max_env_steps} commands per game; a command that is not admissible does "
        "nothing and still counts."
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
    command = f"<answer>one game command, e.g. {suite.example_command}</answer>"
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


def with_game_prompt(config: TaskRunConfig, suite: GameSuite) -> TaskRunConfig:
    """``config`` with the suite's system prompt for its tools, unless ``env.system_prompt`` names one already."""
    if config.env.system_prompt:
        return config
    settings = game_settings(config, suite)
    prompt = game_system_prompt(
        suite,
        config.env.tools,
        config.env.tool_format,
        max_env_steps=settings.max_env_steps,
        auto_retrieval=config.env.rag_top_k > 0,
        show_admissible=settings.show_admissible,
        debrief=settings.debrief_replies > 0,
    )
    return replace(config, env=replace(config.env, system_prompt=prompt))


# --------------------------------------------------------------------------------------------- one game


_SPACES = re.compile(r"\s+")


def normalize_command(text: str) -> str:
    """The command an ``<answer>`` names: lower case, single spaces, without quotes, a leading ``>`` or a final
    full stop (``"Go to Desk 1."`` → ``go to desk 1``)."""
    command = _SPACES.sub(" ", text).strip().strip("\"'`").strip()
    return command.removeprefix(">").strip().rstrip(".!").strip().lower()


@dataclass
class GameResult:
    """What one game did (the per-game record is :func:`agemem.eval.games.example_record`)."""

    game: GameRef
    task: str
    """the goal sentence."""
    won: bool
    env_steps: int
    invalid: int
    """commands the game did not accept (each cost a step)."""
    no_action: int
    """steps whose replies all went to tools or format errors."""
    ended_by: str
    """won, lost (the environment ended the game), step_limit, prompt_too_long, engine_error or env_error."""
    steps: list[Step]
    """every LLM call, in order (agent replies and policy-written summaries)."""
    stats: EpisodeStats
    transcript: list[dict[str, Any]] = field(default_factory=list)
    """one entry per environment step: the command (None when none was given), whether it was accepted, and
    what the game said."""
    error: str | None = None
    progress: float = 0.0
    """the best ``GameState.progress`` of the game, in [0, 1] (1 when won): the game's progress rate."""
    score: float | None = None
    """the environment's own score at the end (SciWorld), else None."""


class GameError(Exception):
    """The game engine failed (ends the game as env_error; the run goes on)."""


class GameEpisode(Episode):
    """One game of ``suite`` as a generator of generation requests (the driver protocol of
    :class:`agemem.rollouts.episode.Episode`, whose reply, summary and prompt-cap handling it reuses):
    ``result = yield from GameEpisode(...).play()``. ``open_game`` replaces ``suite.open`` (tests)."""

    def __init__(
        self,
        suite: GameSuite,
        game: GameRef,
        env: MemoryEnv,
        setup: EpisodeSetup,
        settings: GameConfig,
        *,
        task: Task | None = None,
        rollout_index: int = 0,
        open_game: Callable[[GameRef], TextGame] | None = None,
        first_message: Callable[[str], str] | None = None,
        debrief: Callable[[GameResult], str] | None = None,
    ):
        task = task or game_task(suite, game)
        super().__init__(task, [], env, setup, rollout_index=rollout_index)
        self.suite = suite
        self.game = game
        self.settings = settings
        self.open_game = open_game or (lambda game: suite.open(game, settings))
        self.first_message = first_message
        """what the game's first message becomes (the streaming benchmark puts the retrieved records before it);
        None: the observation with its commands."""
        self.debrief_text = debrief
        """the debrief turn's text from the game so far (its ``transcript`` and outcome); None: the game's own
        (:meth:`_debrief_message`)."""
        self.transcript: list[dict[str, Any]] = []

    def play(self) -> Generator[GenerationRequest, Completion, GameResult]:  # type: ignore[override]
        env, settings = self.env, self.settings
        env.set_stage(3)  # a game is all task stage: TN and the step records count it as Stage 3
        won, over, steps, invalid, idle, ended_by, error = False, False, 0, 0, 0, "step_limit", None
        progress, score = 0.0, None
        world: TextGame | None = None

        def result(error: str | None) -> GameResult:  # the game as it stands when called
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
                progress,
                score,
            )

        try:
            world = self._world(lambda: self.open_game(self.game))
            state = self._world(world.reset)
            won, over, score = state.won, state.over, state.score  # a game may be decided at reset (a custom problem)
            progress = 1.0 if won else 0.0  # AgentBoard's progress starts at 0: it measures what the agent did
            self.task.question = state.goal or state.observation.strip()
            env.task_query = self._query(state.observation)
            first = self._with_commands(state.observation, state)
            env.add_user(self.first_message(first) if self.first_message else first, question=True)
            said = state.observation
            while steps < settings.max_env_steps and not (won or over):
                command = yield from self._command(turn=steps)
                steps += 1
                header = step_header(steps, settings.max_env_steps)
                accepted = False
                if command is None:
                    idle += 1
                    said = no_command_text(settings.max_replies_per_step)
                elif self.suite.strict_admissible and state.admissible and command not in state.admissible:
                    invalid += 1
                    said = inadmissible_text(command)
                else:
                    state = self._world(lambda command=command: world.step(command))  # type: ignore[union-attr]
                    won, over, said, accepted = state.won, state.over, state.observation, state.valid
                    invalid += not accepted
                    if won or accepted:  # a refused command changed nothing, so it moves no progress (AgentBoard)
                        progress = 1.0 if won else max(progress, state.progress)
                    score = state.score
                self.transcript.append({"command": command, "admissible": accepted, "observation": said})
                env.task_query = self._query(said)
                # a memory system is handed what happened (not the command list): a command and its result
                observed = f'Task "{self.task.question}": "{command}" -> {said}' if accepted else ""
                if not (won or over) and steps < settings.max_env_steps:
                    env.add_user(self._with_commands(f"{header} {said}", state), kind="observation", observed=observed)
                else:
                    env.observe(observed)  # the last command (the winning one, say) is remembered too
            ended_by = "won" if won else ("lost" if over else "step_limit")
            env.observe(self._outcome(won, over, steps))  # a memory system keeps the game's outcome for later games
            if settings.debrief_replies and "Add_memory" in env.offered:
                so_far = result(None)
                text = self.debrief_text(so_far) if self.debrief_text else self._debrief_message(won, over, steps, said)
                try:
                    yield from self._debrief(text, settings.debrief_replies, turn=steps)
                except EpisodeOverError as over_error:  # the game is decided; the debrief just stops
                    error = f"debrief: {over_error.error}"
        except EpisodeOverError as over_error:
            ended_by, error = over_error.reason, over_error.error
        except GameError as failure:
            ended_by, error = "env_error", str(failure)
        finally:
            if world is not None:
                try:
                    world.close()
                except Exception as err:  # a failing engine ends this game, not the run
                    ended_by, error = ("env_error", error or f"{self.game.id}: close: {type(err).__name__}: {err}")
        return result(error)

    def _command(self, turn: int) -> Generator[GenerationRequest, Completion, str | None]:
        """Agent replies until one gives a command (``<answer>``), at most ``max_replies_per_step``."""
        for _ in range(self.settings.max_replies_per_step):
            result = yield from self._act(3, turn)
            if result.done:
                return normalize_command(result.answer or "")
        self.limit_hits.append({"stage": 3, "turn": turn, "limit": "turn"})
        return None

    def _outcome(self, won: bool, over: bool, steps: int) -> str:
        task = self.task.question
        if won:
            return f'You completed the task "{task}" in {steps} steps.'
        if over:
            return f'You failed the task "{task}": the game ended it after {steps} steps.'
        return f'The task "{task}" was not completed within {self.settings.max_env_steps} steps.'

    def _debrief_message(self, won: bool, over: bool, steps: int, said: str) -> str:
        """How the game ended, and the request to store what worked (the agent's ``<answer>`` ends the game)."""
        outcome = self._outcome(won, over, steps)
        return (
            f"{said}\n\nThe game is over. {outcome} Store what may help in later games with your memory tools, then "
            "reply with <answer>done</answer>."
        )

    def _query(self, observation: str) -> str:
        """What the game is about now, for a retrieval by task (``env.rag_query=task``): the goal and the latest
        observation, without the command list (a list of commands matches every memory of the same room)."""
        goal, said = self.task.question.strip(), observation.strip()
        return said if not goal or goal in said else f"{goal}\n{said}"

    def _with_commands(self, text: str, state: GameState) -> str:
        if not self.settings.show_admissible:
            return text
        return with_commands(text, state.admissible, strict=self.suite.strict_admissible)

    def _world(self, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except Exception as err:  # a broken game file or engine ends this game, not the run
            raise GameError(f"{self.game.id}: {type(err).__name__}: {err}") from err


# --------------------------------------------------------------------------------------------- the task


def game_task(suite: GameSuite, game: GameRef) -> Task:
    """A game as a task record (serialisable: the game's source and type ride in the metadata)."""
    metadata = {"benchmark": suite.name, "task_type": game.task_type, "source": game.source}
    return Task(game.id, "", "", [], [], metadata)


def task_game(suite: GameSuite, task: Task) -> GameRef:
    """The game a :func:`game_task` record stands for."""
    return suite.reopen(task.id, task.metadata["task_type"], task.metadata["source"])


GAME_ENDINGS: dict[str, EndedBy] = {
    "won": "answer",
    "lost": "round_limit",
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
            "benchmark": episode.suite.name,
            "task_type": result.game.task_type,
            "won": result.won,
            "progress": result.progress,
            "score": result.score,
            "env_steps": result.env_steps,
            "invalid": result.invalid,
            "no_action": result.no_action,
            "game_ended_by": result.ended_by,
            "transcript": result.transcript,
        },
    )


def game_task_reward(meta: Mapping[str, Any]) -> float:
    """R_task of a game (paper Eq. 3's task term, 0/1 for environments): 1 when it was won, else 0."""
    return 1.0 if meta.get("won") else 0.0


@dataclass
class GameScorer:
    """R_task = 1 when the game was won, else 0 (:func:`game_task_reward`); the context terms, the memory terms
    that apply (the judge's relevance of the agent's retrievals to the game's goal; maintenance under
    ``reward.terms=paper`` only: under ``effects`` it pays the judged gain of the memory Stage 1 built, and a game
    has no Stage 1, so no storage and no maintenance) and the penalties as for QA tasks
    (``agemem.rewards.composite.reward_breakdown``). The breakdown also reports ``<name>/won`` and
    ``<name>/progress`` (not rewarded)."""

    name: str
    judge: Judge
    config: RewardConfig
    token_budget: int

    def __call__(self, trajectories: Sequence[Trajectory], tasks: Sequence[Task]) -> list[dict[str, float]]:
        items = [RelevanceItem(t.question, tuple(r.contents)) for t in trajectories for r in t.stats.retrievals]
        relevance = iter(self.judge.relevance_scores(items))
        breakdowns = []
        for trajectory in trajectories:
            retrieval_scores = [next(relevance) for _ in trajectory.stats.retrievals]
            won = game_task_reward(trajectory.meta)
            breakdown = reward_breakdown(trajectory, won, [], retrieval_scores, self.config, self.token_budget)
            breakdown[f"{self.name}/won"] = won
            breakdown[f"{self.name}/progress"] = float(trajectory.meta.get("progress", won))
            trajectory.reward = breakdown
            breakdowns.append(breakdown)
        return breakdowns

    def report(self, breakdowns: Sequence[Mapping[str, float]]) -> dict[str, Any]:
        return {"rewards": mean_breakdown(breakdowns), "judge": {"name": self.judge.name}}


@dataclass(frozen=True)
class GameTask:
    """A suite's games as a training task (:class:`agemem.tasks.base.TaskSpec`): ``data.source=<suite.name>``
    plays the games of ``<suite.name>.split`` (``<suite.name>.limit``, then ``data.limit``)."""

    suite: GameSuite
    uses_distractors: bool = False

    @property
    def name(self) -> str:
        return self.suite.name

    @property
    def evaluation(self) -> Evaluation | None:
        return self.suite.evaluation

    @property
    def stream(self) -> StreamSpec | None:
        return self.suite.stream

    @property
    def settings(self) -> type[GameConfig]:
        return self.suite.settings

    def accepts(self, source: str) -> bool:
        return False

    def configure(self, config: TaskRunConfig) -> TaskRunConfig:
        return with_game_prompt(config, self.suite)

    def load(self, config: TaskRunConfig) -> list[Task]:
        return [game_task(self.suite, game) for game in load_games(config, self.suite)]

    def stages(self, task: Task, distractors: list[str], rollout: RolloutConfig) -> Stages:
        """No Stage 1 or 2; Stage 3 is the game (its first observation, then one per command)."""
        return Stages([], [], task.question)

    def episodes(self, config: TaskRunConfig) -> EpisodeFactory:
        suite, settings = self.suite, game_settings(config, self.suite)

        def play(
            task: Task, distractors: list[str], env: MemoryEnv, setup: EpisodeSetup, rollout_index: int
        ) -> Generator[GenerationRequest, Completion, Trajectory]:
            game = task_game(suite, task)
            episode = GameEpisode(suite, game, env, setup, settings, task=task, rollout_index=rollout_index)
            result = yield from episode.play()
            return game_trajectory(result, episode)

        return play

    def scorer(self, config: TaskRunConfig, encoder: Encoder | None) -> GameScorer:
        judge = build_judge(config.reward.judge, encoder)
        return GameScorer(self.suite.name, judge, config.reward, config.env.context.max_context_tokens)
