"""Plays one episode on a chat model, one request at a time: the driver where replies cannot be batched.

An episode (:class:`agemem.rollouts.episode.Episode`, a game's :class:`agemem.tasks.games.GameEpisode`) is a
generator of generation requests; :class:`agemem.rollouts.driver.RolloutDriver` batches the requests of many
episodes into one engine call per tick. A stream cannot: task t's memory decides what task t+1 sees, so its tasks
run one after the other, each on a :class:`~agemem.rollouts.engines.chat.ChatModel` (messages in, one reply out).
This driver answers each request with one chat call under its own derived seed and counts what the calls cost.
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any, TypeVar

from agemem.rollouts.engines.base import Completion, derive_seed
from agemem.rollouts.engines.chat import ChatModel, EngineChat
from agemem.rollouts.episode import GenerationRequest

Result = TypeVar("Result")


@dataclass
class ChatDriver:
    """``result = ChatDriver(model, seed, setup.tokenizer).play(episode.play())``: the ``i``-th call samples under
    ``derive_seed(seed, i)`` (no seed: the model's own sampling)."""

    model: ChatModel
    seed: int | None
    tokenizer: Any = None
    """the tokenizer the episode renders its prompts with; when it is an :class:`EngineChat` model's own, the
    request's ids go to the engine as they are instead of being rendered a second time."""
    calls: int = 0
    """chat calls made, a failed one included."""
    prompt_tokens: int = 0
    """prompt tokens over all calls, as the model counted them."""

    def play(self, run: Generator[GenerationRequest, Completion, Result]) -> Result:
        """Run the episode to its end and return what it returns. An engine failure is handed to the episode as
        an ``error`` completion, which ends it the way it ends any episode (``engine_error``)."""
        try:
            request = next(run)
        except StopIteration as finished:
            return finished.value
        while True:
            completion = self.complete(request)  # outside the try: a StopIteration from the model is its own error
            try:
                request = run.send(completion)
            except StopIteration as finished:
                return finished.value

    def complete(self, request: GenerationRequest) -> Completion:
        """One chat call for ``request``; the reply's text is the completion (chat endpoints' own text is the
        truth, as :class:`~agemem.rollouts.engines.chat.EngineChat` decodes it)."""
        seed = None if self.seed is None else derive_seed(self.seed, self.calls)
        if isinstance(self.model, EngineChat) and self.tokenizer is self.model.tokenizer:
            reply = self.model.complete(request.prompt_ids, request.messages, seed)
        else:
            reply = self.model(request.messages, request.tools, seed)
        self.calls += 1
        self.prompt_tokens += reply.prompt_tokens
        if reply.error is not None:
            return Completion([], None, "error", error=reply.error)
        return Completion([], None, "stop", text=reply.text)
