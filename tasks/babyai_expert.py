"""The BabyAI expert: minigrid's ``BabyAIBot`` played from a game's start with the primitive actions
(:func:`bot_commands`), then said in the configured commands, as few as cover its grid steps (:func:`shorten`: a
command stands for a stretch of steps when its walk ends where the bot's walk does and its other actions are the
bot's next ones, so ``go to X n``, ``pickup X n`` and ``toggle and go through X n`` replace runs of steps);
:func:`bot_plan` does both. It wins all 112 games under each action set: ``agentboard`` 1-74 commands (median 4),
6 games over 30; ``primitives_go_to`` 1-85, 11 over 30; ``primitives`` 1-188, 33 over 30.

The bot loops without end on some seeds, so it runs in a worker process (:func:`serve_expert`, this module's
entry point) that :func:`agemem.tasks.babyai.expert_plan` starts by this module's name (``python -c "from
agemem.tasks.babyai_expert import serve_expert; ..."``, :data:`agemem.tasks.babyai.EXPERT_MODULE`), keeps across
games and kills past its budget.
"""

from __future__ import annotations

import contextlib
import io
import os
import resource
import signal
from multiprocessing.connection import Connection
from typing import Any

from agemem.tasks.babyai import BabyaiGame, BabyaiMissingError, leaves_done, require_babyai
from agemem.tasks.babyai_view import (
    DIRECTIONS,
    PRIMITIVE,
    Pose,
    add,
    admissible,
    current_view,
    front_actions,
    view_of,
)
from agemem.tasks.textgame import NoPlanError

MAX_BOT_STEPS = 2_000
"""grid steps after which the bot is taken to have failed (it needs at most a few hundred on these levels)."""
_TURNS = {0: "turn left", 1: "turn right", 2: "move forward"}


Played = tuple[str, Pose, tuple[bool, ...], int]
"""one grid step of the bot: its command (primitive action set), the agent's pose and the mission's done
instructions after it, and the minigrid action."""


def bot_commands(game: BabyaiGame) -> list[Played]:
    """The BabyAI bot's solution from ``game``'s start (a game with the ``primitives`` action set), one command per
    grid step (:data:`Played`); ``game`` is reset and played to the win. The bot's ``done`` (the goal is faced
    already) becomes ``turn left``, ``turn right`` (the check comes after the second). Raises
    :class:`NoPlanError` when the bot does not win. Runs in this process, unbounded:
    :func:`~agemem.tasks.babyai.expert_plan` bounds it."""
    bot_class = require_babyai()["BabyAIBot"]
    state = game.reset()
    bot = bot_class(game.env)
    played: list[Played] = []
    while not state.won and len(played) < MAX_BOT_STEPS:
        action = int(bot.replan())
        steps = [PRIMITIVE["left"], PRIMITIVE["right"]] if action == PRIMITIVE["done"] else [action]
        for step in steps:
            command = _command_for(game, step)
            if command not in state.admissible or state.over:
                raise NoPlanError(f"{game.env_id}:{game.seed}: the bot's {command!r} is not admissible")
            state = game.step(command)
            played.append((command, game.pose, tuple(leaves_done(game.env.instrs, state.won)), step))
    if not state.won:
        raise NoPlanError(f"{game.env_id}:{game.seed}: the BabyAI bot did not win in {MAX_BOT_STEPS} steps")
    return played


def _command_for(game: BabyaiGame, action: int) -> str:
    """The text command that runs minigrid ``action`` now (a one-action command of the primitive set)."""
    if action in _TURNS:
        return _TURNS[action]
    view = current_view(game.env)
    matches = [command for command, actions in front_actions(game.env, view).items() if actions == action]
    return matches[0] if matches else f"<minigrid action {action}>"


def shorten(game: BabyaiGame, played: list[Played]) -> list[str]:
    """``played`` said in ``game``'s action set in the fewest commands: in the bot's state before each of its steps,
    each admissible command stands for a stretch of the steps from there (:func:`_covers`: its walk ends in a pose
    the bot reaches, skipping no pose where a ``go to`` instruction was done, and its other actions are the bot's
    next ones), so ``go to X``, ``pickup X n`` or ``toggle and go through X n`` replace runs of steps; the plan is
    the fewest such stretches that cover the bot's steps. ``game`` is reset and the plan played on it, checked to
    leave the agent where the bot was and to win: :class:`NoPlanError` when a step has no command, or it does
    not."""
    stretches = _stretches(game, played)
    fewest: dict[int, list[tuple[str, int]]] = {0: []}  # steps covered -> the commands (and where each ends)
    for index in range(len(played)):
        if index not in fewest:
            continue
        for last, name in stretches[index]:
            if last + 1 not in fewest or len(fewest[index]) + 1 < len(fewest[last + 1]):
                fewest[last + 1] = [*fewest[index], (name, last)]
    if len(played) not in fewest:
        first = min(set(range(len(played) + 1)) - set(fewest))
        raise NoPlanError(
            f"{game.env_id}:{game.seed}: the bot's {played[first - 1][0]!r} has no command in the {game.actions!r} "
            "action set"
        )
    state = game.reset()
    for name, last in fewest[len(played)]:
        if name not in state.admissible:
            raise NoPlanError(f"{game.env_id}:{game.seed}: {name!r} is not admissible where the bot was")
        state = game.step(name)
        if not state.won and game.pose != played[last][1]:
            raise NoPlanError(f"{game.env_id}:{game.seed}: {name!r} left the agent elsewhere than the bot")
    if not state.won:
        raise NoPlanError(f"{game.env_id}:{game.seed}: the bot's plan said in {game.actions!r} commands does not win")
    return [name for name, _ in fewest[len(played)]]


def _stretches(game: BabyaiGame, played: list[Played]) -> list[list[tuple[int, str]]]:
    """For each step of ``played``, the commands of ``game``'s action set admissible in the bot's state before it,
    each with a last step it may stand for (:func:`_covers`), longest first: the bot's steps are replayed on a game
    of the same level with the primitive actions, and its state read with ``game``'s commands."""
    replay = BabyaiGame(game.env_id, game.seed, actions="primitives", mission_wording="minigrid")
    try:
        replay.reset()
        stretches: list[list[tuple[int, str]]] = []
        for index, (command, *_) in enumerate(played):
            env = replay.env
            done_before = played[index - 1][2] if index else tuple(leaves_done(env.instrs, False))
            commands = admissible(env, view_of(env, game.actions), game.actions)
            ends = [
                (last, name)
                for name, run in commands.items()
                for last in _covers(replay.pose, run, played, index, done_before)
            ]
            stretches.append(sorted(ends, key=lambda end: -end[0]))
            replay.step(command)
        return stretches
    finally:
        replay.close()


_MOVE_ACTIONS = (PRIMITIVE["left"], PRIMITIVE["right"], PRIMITIVE["forward"], PRIMITIVE["done"])


def _covers(
    pose: Pose, actions: list[int], played: list[Played], start: int, done_before: tuple[bool, ...]
) -> list[int]:
    """The indices of ``played`` at which a stretch from ``start`` may end that the command running ``actions``
    from ``pose`` stands for. ``actions`` is a walk (turns, moves) and a tail from its first other action on: the
    walk must end in a pose that the bot's run of moves from ``start`` reaches (:func:`_moves_reaching`; an empty
    walk reaches ``pose`` as it is), and the tail must be the bot's very next actions."""
    split = next((i for i, action in enumerate(actions) if action not in _MOVE_ACTIONS), len(actions))
    walk, tail = actions[:split], actions[split:]
    reached = _moves_reaching(played, start, _pose_after(pose, walk), done_before) if walk else [start - 1]
    ends = []
    for index in reached:
        following = [step[3] for step in played[index + 1 : index + 1 + len(tail)]]
        if following == tail and index + len(tail) >= start:
            ends.append(index + len(tail))
    return ends


def _pose_after(pose: Pose, actions: list[int]) -> Pose:
    cell, direction = pose
    for action in actions:
        if action == PRIMITIVE["left"]:
            direction = (direction + 3) % 4
        elif action == PRIMITIVE["right"]:
            direction = (direction + 1) % 4
        elif action == PRIMITIVE["forward"]:
            cell = add(cell, DIRECTIONS[direction])
    return cell, direction


def _moves_reaching(played: list[Played], start: int, pose: Pose, done_before: tuple[bool, ...]) -> list[int]:
    """The indices from ``start`` on, within a run of moves that completes no instruction before its end, whose
    pose is ``pose``."""
    found = []
    for index in range(start, len(played)):
        _, after, done, action = played[index]
        if action not in _MOVE_ACTIONS:
            break
        if after == pose:
            found.append(index)
        if done != done_before:  # a go-to instruction was checked here: a shortcut must not skip this pose
            break
    return found


def bot_plan(env_id: str, seed: int, actions: str = "agentboard") -> list[str]:
    """A winning command list for ``env_id`` at ``seed`` in the action set ``actions``: the BabyAI bot played on a
    game with the primitive actions (:func:`bot_commands`), then said in ``actions`` (:func:`shorten`). Runs in
    this process, without a time bound (the bot may never return): :func:`~agemem.tasks.babyai.expert_plan` runs
    it in a worker."""
    primitive = BabyaiGame(env_id, seed, actions="primitives", mission_wording="minigrid")
    target = BabyaiGame(env_id, seed, actions=actions, mission_wording="minigrid")
    try:
        return shorten(target, bot_commands(primitive))
    finally:
        primitive.close()
        target.close()


def serve_expert(fd: int, memory_bytes: int) -> None:
    """The expert's worker process: plans the games sent over the connection on ``fd`` (``(env id, seed, action
    set, budget)`` -> ``("plan", commands)``, or ``("error" | "memory", message)``) until it closes. Its address
    space is limited to ``memory_bytes``; an alarm at twice the budget ends a plan the parent has given up on
    (should the parent be gone without killing it)."""
    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    connection = Connection(fd)
    with open(os.devnull, "wb") as devnull:  # the parent stops reading stderr once the worker runs
        os.dup2(devnull.fileno(), 2)

    def late(signum: int, frame: Any) -> None:
        raise TimeoutError("the plan ran past twice its budget")

    signal.signal(signal.SIGALRM, late)
    with contextlib.suppress(BabyaiMissingError):  # imported before the first budget starts (else each plan says it)
        require_babyai()
    connection.send(("ready", None))
    while True:
        try:
            env_id, seed, actions, budget_s = connection.recv()
        except (EOFError, OSError):
            return
        signal.setitimer(signal.ITIMER_REAL, 2 * budget_s + 1)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                answer: tuple[str, Any] = ("plan", bot_plan(env_id, seed, actions))
        except MemoryError:
            answer = ("memory", f"the BabyAI bot ran out of the expert's {memory_bytes / 2**30:g} GiB of memory")
        except Exception as err:
            answer = ("error", str(err) if isinstance(err, NoPlanError) else f"{type(err).__name__}: {err}")
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
        try:
            connection.send(answer)
        except OSError:
            return
