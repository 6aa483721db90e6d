"""How task material is phrased as user turns.

Stage-1 facts and Stage-2 corpus distractors use the same casual templates, so the agent
cannot tell them apart by phrasing, only by content. The choice of template is seeded by
the task id: all K rollouts of a task (and every run) see exactly the same messages.
"""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from agemem.rollouts.records import Paragraph, Task

CASUAL_TEMPLATES = (
    "By the way, I was reading about {title} earlier. {text}",
    "Something I came across today, about {title}: {text}",
    "Quick note while I remember it. {title}: {text}",
    "A friend told me about {title}. {text}",
    "Here's a bit of trivia on {title}. {text}",
    "I saw this in an article about {title}: {text}",
)
SINGLE_MESSAGE_HEADER = "Here is some background information.\n\n"


def task_rng(task_id: str, purpose: str) -> random.Random:
    """A random stream fixed by the task and what it is for (Python's hash() is salted per process)."""
    digest = hashlib.blake2b(f"{purpose}:{task_id}".encode(), digest_size=8).digest()
    return random.Random(int.from_bytes(digest, "little"))


def casual(title: str, text: str, rng: random.Random) -> str:
    return rng.choice(CASUAL_TEMPLATES).format(title=title, text=text)


def stage1_messages(task: Task, mode: Literal["turns", "single"], paragraphs_per_turn: int) -> list[str]:
    """The Stage-1 user turns carrying ``task.contexts``.

    turns: ``paragraphs_per_turn`` paragraphs per message, each in a casual template (paper);
    single: every paragraph in one message, ``title: text`` per line (the authors' code).
    """
    paragraphs: list[Paragraph] = [p for p in task.contexts if p.text]
    if not paragraphs:
        return []
    if mode == "single":
        return [SINGLE_MESSAGE_HEADER + "\n\n".join(f"{p.title}: {p.text}" for p in paragraphs)]
    rng = task_rng(task.id, "stage1")
    groups = [paragraphs[i : i + paragraphs_per_turn] for i in range(0, len(paragraphs), paragraphs_per_turn)]
    return ["\n\n".join(casual(p.title, p.text, rng) for p in group) for group in groups]
