"""`agemem chat`: an interactive terminal conversation with a :class:`~agemem.entrypoints.agent.MemoryAgent`.

Every tool call the policy makes is printed as it happens (name, arguments, result), then its answer.
Lines starting with ``/`` are commands: ``/memories`` lists long-term memory, ``/new`` starts a fresh
conversation (long-term memory stays), ``/help``, ``/exit`` (or Ctrl-D). Memories are committed to the
``--memory`` file as they are made, so quitting at any point loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape

if TYPE_CHECKING:
    from agemem.entrypoints.agent import AgentStep, MemoryAgent

HELP = "/memories: list long-term memory · /new: fresh conversation (memory stays) · /exit: quit (or Ctrl-D)"
_PREVIEW_CHARS = 160


def print_step(console: Console, step: AgentStep) -> None:
    """One reply of the policy: each tool call with its result, and any format problem."""
    for event in step.tool_events if step.automatic else []:
        console.print(f"  [magenta]↺ recalled for the policy: {escape(str(event.result.get('message', '')))}[/magenta]")
        for memory in event.result.get("memories", [])[:5]:
            console.print(f"    [dim]· {escape(_clip(str(memory.get('content', ''))))}[/dim]")
    for event in step.tool_events if not step.automatic else []:
        arguments = json.dumps(event.arguments, ensure_ascii=False)
        status = "ok" if event.ok else "error"
        message = str(event.result.get("message", ""))
        console.print(f"  [cyan]⚙ {escape(event.name)}[/cyan] {escape(_clip(arguments))}")
        console.print(f"    [dim]→ {status}: {escape(_clip(message))}[/dim]")
        for memory in event.result.get("memories", [])[:5] if event.name == "Retrieve_memory" else []:
            console.print(f"    [dim]· {escape(_clip(str(memory.get('content', ''))))}[/dim]")
    for violation in step.violations:
        console.print(f"  [yellow]! format: {escape(_clip(violation))}[/yellow]")


def run_chat(agent: MemoryAgent, console: Console, read: Callable[[str], str] = input) -> int:
    """The read-reply loop until ``/exit`` or end of input; returns the exit status."""
    from agemem.entrypoints.agent import AgentError

    agent.on_step = lambda step: print_step(console, step)
    count = len(agent.memories())
    console.print(f"[bold]agemem chat[/bold] · {count} memor{'y' if count == 1 else 'ies'} on file · {HELP}")
    while True:
        try:
            line = read("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            console.print()
            return 0
        if not line:
            continue
        if line in ("/exit", "/quit"):
            return 0
        if line == "/help":
            console.print(HELP)
        elif line == "/new":
            agent.new_conversation()
            console.print("[dim](new conversation; long-term memory kept)[/dim]")
        elif line == "/memories":
            entries = agent.memories()
            for entry in entries:
                console.print(f"  {escape(entry.id)}  {escape(_clip(entry.content))}")
            console.print(f"[dim]({len(entries)} memor{'y' if len(entries) == 1 else 'ies'})[/dim]")
        elif line.startswith("/"):
            console.print(f"unknown command {escape(line)!r}; {HELP}")
        else:
            try:
                reply = agent.chat(line)
            except AgentError as err:  # an endpoint hiccup ends the turn, not the session
                console.print(f"[red]error: {escape(str(err))}[/red]")
                continue
            console.print(f"[bold green]agent>[/bold green] {escape(reply.text)}")


def _clip(text: str) -> str:
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"
