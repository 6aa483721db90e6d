"""Answer normalisation shared by rollouts (which paragraphs reveal the answer) and rewards (EM/F1)."""

from __future__ import annotations

import re
import string

_THINK_BLOCK = re.compile(r"^\s*<think>.*?</think>", re.DOTALL)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalize_answer(text: str) -> str:
    """HotpotQA's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = _ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION))
    return " ".join(text.split())


def contains_answer(text: str, answer: str) -> bool:
    """Whether ``answer`` occurs in ``text`` as whole words after normalisation.

    Yes/no answers (HotpotQA comparison questions) appear in almost any text and never
    reveal the answer, so they are never "contained".
    """
    needle = normalize_answer(answer)
    if not needle or needle in ("yes", "no"):
        return False
    return f" {needle} " in f" {normalize_answer(text)} "


def strip_thinking(text: str) -> str:
    """The reply without a leading ``<think>…</think>`` block (reasoning models write one), stripped."""
    return _THINK_BLOCK.sub("", text).strip()
