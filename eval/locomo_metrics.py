"""LoCoMo answer scoring, in the two conventions papers report, each as its own code computes it.

LoCoMo (Maharana et al., ACL 2024) has 1,986 questions over 10 conversations, with ``category`` 1-5;
category 5 is adversarial (the conversation never says what the question presupposes). Two families of
papers score it differently, and a result is only comparable within its family:

**LoCoMo's own evaluation** (snap-research/LoCoMo ``task_eval/evaluation.py``, ``eval_question_answering``, at
commit 3eb6f2c; followed by papers that compare with the LoCoMo paper): :func:`locomo_f1`. Token F1 with Porter
stemming over LoCoMo's normalisation; category 1 splits prediction and gold on commas (multi-answer F1),
category 3 keeps the gold only up to its first ``;``, category 5 scores 1 when the prediction says
"no information available" or "not mentioned". Its ``evaluation_stats.py`` reports the mean per category and
an overall mean over **all five** categories.

**Mem0's evaluation** (mem0ai/mem0 ``evaluation/metrics/utils.py``, ``llm_judge.py``, ``evals.py``; the
metrics are borrowed from A-Mem, Xu et al. 2025, and Memory-R1 and others reuse them): :func:`mem0_f1`
(F1 over *sets* of lower-cased tokens), :func:`bleu1` (NLTK's sentence BLEU with weights (1, 0, 0, 0) and
Chen & Cherry smoothing method 1) and J, an LLM judge's CORRECT/WRONG verdict (:func:`j_messages`,
:func:`parse_j_label`). Category 5 is skipped altogether, and "overall" is the mean over categories 1-4.

:func:`aggregate` reports both: per category, overall over categories 1-4, category 5 apart, and LoCoMo's
all-category mean.

Reproduction, and where it is not exact:

* NLTK at run time (the ``locomo`` extra): its ``PorterStemmer`` (LoCoMo's F1), and ``word_tokenize``'s two
  pieces (BLEU-1) without the trained Punkt model, a separate data download: Punkt's algorithm with
  :data:`PUNKT_ABBREVIATIONS` and no learned statistics, then ``NLTKWordTokenizer``. Mem0 lower-cases before
  tokenising, and on lower-cased text the trained model differs from this only where a token ending in ``.`` is
  an abbreviation in one list and not in the other, which only decides whether that ``.`` is its own token.
* LoCoMo's normalisation removes articles with the ``regex`` package's ``\\b``; this module uses ``re``,
  whose word characters differ only for combining marks (never next to "a", "an", "the", "and" in LoCoMo).
* Mem0's J parser takes ``json.loads(...)["label"] == "CORRECT"`` (any other label is 0, a reply without
  JSON crashes the run); :func:`parse_j_label` accepts the label in any case and inside code fences or
  prose, and returns None, with the reason, for a reply it cannot read, for the caller to count.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from agemem.core.configlib import ConfigError
from agemem.core.text import strip_thinking

# --------------------------------------------------------------------------------------------- categories

CATEGORIES = (1, 2, 3, 4, 5)
"""LoCoMo's ``category`` ids."""
ADVERSARIAL = 5
"""The adversarial category: its questions have ``adversarial_answer`` instead of ``answer``."""
SCORED_CATEGORIES = (1, 2, 3, 4)
"""The categories Mem0-style papers score and average into "overall"."""

LOCOMO_CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
"""Names per LoCoMo's code and data (see :func:`category_name`)."""
MEM0_CATEGORY_NAMES = {1: "single-hop", 2: "temporal", 3: "multi-hop", 4: "open-domain", 5: "adversarial"}
"""Names per Mem0's paper and its maintainers (see :func:`category_name`)."""
CATEGORY_NAMES = {"locomo": LOCOMO_CATEGORY_NAMES, "mem0": MEM0_CATEGORY_NAMES}


def category_name(category: int | str, convention: str = "locomo") -> str:
    """The name of LoCoMo category ``category`` (1-5, or its string) in ``convention`` (``"locomo"`` or ``"mem0"``).

    Papers name categories 1-4 differently, and neither the LoCoMo paper nor its data file states the
    mapping; take the names from the code of the paper you compare with.

    * ``"locomo"``: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial. From LoCoMo's code:
      ``eval_question_answering`` scores category 1 with the comma-split multi-answer F1 under the comment
      "multi-hop", 5 under "adversarial", and 2, 3, 4 plainly under "single-hop, temporal, open-domain";
      ``hf_llm_utils.py`` names "Temporal (2)" (it appends "Use DATE of CONVERSATION" to category 2). The
      code does not say which of 3 and 4 is single-hop; the data does: category 3's 96 questions ask for
      inferences ("Would Caroline likely ...?", gold "Likely no; <rationale>", hence the ``;`` cut), category
      4's 841 are direct look-ups, and the LoCoMo paper's counts rank single-hop the largest and
      open-domain (commonsense / world knowledge) the smallest class. So 3 = open-domain and 4 = single-hop
      is an inference from the data, not something the code names.
    * ``"mem0"``: 1 single-hop, 2 temporal, 3 multi-hop, 4 open-domain, 5 adversarial. Mem0's code names no
      category (it groups by id and skips 5); this mapping is its maintainers' statement (mem0ai/mem0
      issue #2609, 2025-05-02), and matches the columns of the Mem0 paper. It differs from LoCoMo's on
      categories 1, 3 and 4: Mem0's "multi-hop" column is LoCoMo's open-domain category 3, and so on.
      Other papers in the Mem0 family (A-Mem, Memory-R1, ...) are not checked here.
    """
    names = CATEGORY_NAMES.get(convention)
    if names is None:
        raise ValueError(f"unknown category naming convention {convention!r}; expected one of {sorted(CATEGORY_NAMES)}")
    return names[_category(category)]


def _category(category: int | str) -> int:
    try:
        value = int(category)
    except (TypeError, ValueError):
        raise ValueError(f"LoCoMo category {category!r} is not one of {CATEGORIES}") from None
    if value not in CATEGORIES:
        raise ValueError(f"LoCoMo category {category!r} is not one of {CATEGORIES}")
    return value


# --------------------------------------------------------------------------------------------- NLTK

NLTK_HINT = "LoCoMo's metrics need NLTK (its Porter stemmer and tokenizers): pip install 'agemem[locomo]'"


@lru_cache(maxsize=1)
def _nltk() -> dict[str, Any]:
    """NLTK's Porter stemmer, an untrained Punkt sentence splitter and the Treebank word tokenizer: the pieces of
    ``nltk.word_tokenize`` that need no data download (the trained Punkt model is a separate download)."""
    try:
        from nltk.stem import PorterStemmer
        from nltk.tokenize.destructive import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer
    except ImportError as err:
        raise ImportError(f"{NLTK_HINT} ({err})") from err
    parameters = PunktParameters()
    parameters.abbrev_types = set(PUNKT_ABBREVIATIONS)
    return {
        "stem": PorterStemmer().stem,
        "sentences": PunktSentenceTokenizer(parameters).tokenize,
        "words": NLTKWordTokenizer().tokenize,
    }


def require_nltk() -> None:
    """Fail now, naming the install line, when NLTK is missing: before a run ingests a conversation, not after."""
    try:
        _nltk()
    except ImportError as err:
        raise ConfigError(str(err)) from err


PUNKT_ABBREVIATIONS = frozenset(
    {
        *("mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "vs", "e.g", "i.e", "a.m", "p.m", "u.s", "u.k"),
        *("inc", "corp", "co", "ltd", "jan", "feb", "aug", "sept", "oct", "nov", "dec"),
    }
)
"""Lower-cased tokens (without their final ``.``) that end no sentence: the stand-in for the trained English
Punkt model's learned list (a download this module does not make), so "dr. seuss" stays one sentence."""


def porter_stem(word: str) -> str:
    """The Porter (1980) stem of ``word`` by NLTK's ``PorterStemmer`` (its default ``NLTK_EXTENSIONS`` mode), which
    LoCoMo's F1 applies to every token: caresses -> caress, ponies -> poni, relational -> relat."""
    return _nltk()["stem"](word)


def split_sentences(text: str) -> list[str]:
    """Punkt's sentence split with :data:`PUNKT_ABBREVIATIONS` and no learned statistics."""
    return _nltk()["sentences"](text)


def word_tokenize(text: str) -> list[str]:
    """``nltk.word_tokenize(text)`` without the Punkt model download: :func:`split_sentences`, then NLTK's
    Treebank word tokenizer on each sentence. E.g. "it's got so much - you won't regret it." -> ``it 's got
    so much - you wo n't regret it .``. It differs from the trained model only where a token ending in ``.``
    is an abbreviation in one list and not the other ("j.k. rowling": here ``j.k``, ``.``, ``rowling``)."""
    words = _nltk()["words"]
    return [token for sentence in split_sentences(text) for token in words(sentence)]


# --------------------------------------------------------------------------------------------- LoCoMo's F1

_ASCII_PUNCTUATION = frozenset(string.punctuation)
_LOCOMO_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_NO_ANSWER_PHRASES = ("no information available", "not mentioned")


def locomo_normalize(text: str) -> str:
    """LoCoMo's ``normalize_answer``: delete commas, lower-case, delete ASCII punctuation
    (``string.punctuation``), replace the whole words "a", "an", "the" and "and" by a space, and collapse
    whitespace. (Commas are deleted without a space, so ``"x,y"`` becomes ``"xy"``.)"""
    text = text.replace(",", "").lower()
    text = "".join(ch for ch in text if ch not in _ASCII_PUNCTUATION)
    return " ".join(_LOCOMO_ARTICLES.sub(" ", text).split())


def locomo_tokens(text: str) -> list[str]:
    """The Porter stems (:func:`porter_stem`) of the whitespace tokens of :func:`locomo_normalize` (text)."""
    return [porter_stem(token) for token in locomo_normalize(text).split()]


def locomo_token_f1(prediction: str, answer: str) -> float:
    """LoCoMo's ``f1_score``: token F1 over stemmed tokens, with multiset overlap.

    With ``P``, ``G`` the :func:`locomo_tokens` of prediction and answer and ``k = |P ∩ G|`` (multiset
    intersection): 0 when ``k = 0`` (so also when either side has no token); else ``precision = k / |P|``,
    ``recall = k / |G|``, ``F1 = 2 · precision · recall / (precision + recall)``.
    """
    predicted, gold = locomo_tokens(prediction), locomo_tokens(answer)
    overlap = sum((Counter(predicted) & Counter(gold)).values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(predicted)
    recall = overlap / len(gold)
    return (2 * precision * recall) / (precision + recall)


def locomo_multi_f1(prediction: str, answer: str) -> float:
    """LoCoMo's ``f1`` (its category-1 multi-answer F1): split prediction and answer on ``,`` into parts
    ``p_1..p_m`` and ``g_1..g_n`` (each stripped; a part may be empty), then
    ``(1/n) · Σ_j max_i locomo_token_f1(p_i, g_j)`` (the mean taken with ``numpy.mean``, as LoCoMo does)."""
    predicted = [part.strip() for part in prediction.split(",")]
    gold = [part.strip() for part in answer.split(",")]
    return float(np.mean([max(locomo_token_f1(p, g) for p in predicted) for g in gold]))


def locomo_adversarial(prediction: str) -> float:
    """LoCoMo's category-5 score: 1.0 when the lower-cased prediction contains "no information available"
    or "not mentioned" (the phrasings of the refusal option its harness offered), else 0.0."""
    lowered = prediction.lower()
    return 1.0 if any(phrase in lowered for phrase in _NO_ANSWER_PHRASES) else 0.0


def locomo_f1(prediction: str, answer: str | int | None, category: int | str) -> float:
    """One question's score in LoCoMo's own evaluation (``eval_question_answering``), in [0, 1].

    The gold ``answer`` is taken as ``str(answer)`` (some LoCoMo answers are ints, e.g. 2022); then by
    ``category``:

    * 1: :func:`locomo_multi_f1` (prediction, answer): comma-split parts, mean over gold parts of the best
      part F1;
    * 2, 4: :func:`locomo_token_f1` (prediction, answer);
    * 3: :func:`locomo_token_f1` (prediction, answer cut at its first ``;`` and stripped): LoCoMo's category-3
      golds read "Likely no; <rationale>";
    * 5: :func:`locomo_adversarial` (prediction); ``answer`` is ignored (may be None).

    Follows snap-research/LoCoMo ``task_eval/evaluation.py`` at 3eb6f2c. Raises ValueError for a category
    outside 1-5, or a missing answer in categories 1-4.
    """
    category = _category(category)
    if category == ADVERSARIAL:
        return locomo_adversarial(prediction)
    if answer is None:
        raise ValueError(f"a category-{category} question needs a gold answer")
    gold = str(answer)
    if category == 1:
        return locomo_multi_f1(prediction, gold)
    if category == 3:
        gold = gold.split(";")[0].strip()
    return locomo_token_f1(prediction, gold)


# --------------------------------------------------------------------------------------------- Mem0's F1

_MEM0_SEPARATORS = str.maketrans(".,!?", "    ")


def mem0_tokens(text: str | int) -> set[str]:
    """Mem0 / A-Mem's ``simple_tokenize`` as a set: ``str(text)`` lower-cased, each of ``. , ! ?`` replaced by a
    space, split on whitespace. (No other punctuation is removed: ``"paris;"`` stays one token.)"""
    return set(str(text).lower().translate(_MEM0_SEPARATORS).split())


def mem0_f1(prediction: str | int, answer: str | int) -> float:
    """Mem0's token F1 (``calculate_metrics``'s ``f1``, borrowed from A-Mem), over *sets* of tokens.

    0 when ``str(prediction)`` or ``str(answer)`` is empty; else with ``P``, ``G`` the :func:`mem0_tokens` of
    the stripped strings: 0 when either set is empty; ``precision = |P ∩ G| / |P|``, ``recall = |P ∩ G| / |G|``,
    ``F1 = 2 · precision · recall / (precision + recall)``, 0 when ``precision + recall = 0``. No stemming, no
    article removal, and repeated tokens count once.
    """
    prediction, answer = str(prediction), str(answer)
    if not prediction or not answer:
        return 0.0
    predicted, gold = mem0_tokens(prediction.strip()), mem0_tokens(answer.strip())
    if not predicted or not gold:
        return 0.0
    common = len(predicted & gold)
    precision = common / len(predicted)
    recall = common / len(gold)
    return 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0


# --------------------------------------------------------------------------------------------- BLEU-1


def bleu1(prediction: str | int, answer: str | int) -> float:
    """Mem0 / A-Mem's BLEU-1: NLTK ``sentence_bleu([ref], hyp, weights=(1, 0, 0, 0),
    smoothing_function=SmoothingFunction().method1)`` with ``hyp``, ``ref`` the :func:`word_tokenize` of the
    lower-cased ``str(prediction)``, ``str(answer)``.

    With ``c = |hyp|``, ``r = |ref|`` and ``k`` the clipped unigram matches ``Σ_w min(count_hyp(w),
    count_ref(w))``: 0 when ``k = 0`` (NLTK returns 0 before any smoothing when no unigram matches, so an
    empty side scores 0); else ``BP · exp(log(k / c))`` with the brevity penalty ``BP = 1`` if ``c > r``
    else ``exp(1 - r / c)``. Method 1 adds ε = 0.1 only to the zero counts of 2- to 4-gram precisions,
    whose weights are 0, so it never changes BLEU-1; ``exp(log(·))`` is kept to match NLTK to the last bit.
    """
    hypothesis = word_tokenize(str(prediction).lower())
    reference = word_tokenize(str(answer).lower())
    reference_counts = Counter(reference)
    matches = sum(min(n, reference_counts[token]) for token, n in Counter(hypothesis).items())
    if matches == 0:
        return 0.0
    c, r = len(hypothesis), len(reference)
    brevity = 1.0 if c > r else math.exp(1 - r / c)
    return brevity * math.exp(math.log(matches / c))


# --------------------------------------------------------------------------------------------- J (LLM judge)

J_RUBRIC = (
    "You check answers to questions about a long-running conversation between two people. Each question "
    "asks about something one of them said or did in their earlier chats. You get the question, the gold "
    "answer (short, from the annotators) and a generated answer, and you label the generated answer "
    "CORRECT or WRONG.\n\n"
    "Grade generously. A generated answer may be longer, worded differently or carry extra detail: it is "
    "CORRECT as long as it is about the same thing as the gold answer, and WRONG when it names a different "
    "thing, person, place, number or time, or says nothing about the gold answer's topic.\n\n"
    "For a question about time, the gold answer is a date, month, year or period. The generated answer is "
    "CORRECT when it points to the same date or period in any format or wording (for example '7 May 2023', "
    "'May 7th, 2023' and '2023-05-07' are the same date), including a relative phrase such as 'the Sunday "
    "before' or 'last month' that resolves to it.\n\n"
    "Give at most one short sentence of reasoning, then the verdict as a JSON object with the single key "
    '"label", whose value is "CORRECT" or "WRONG", e.g. {"label": "CORRECT"}. Do not write both words.'
)
"""The J judge's instructions: the rubric of Mem0's ``ACCURACY_PROMPT``, in this project's words."""


def j_messages(question: str, gold_answer: str | int, generated_answer: str) -> list[dict[str, str]]:
    """The chat messages asking an LLM judge for J on one question: a system message with :data:`J_RUBRIC`
    and a user message with the question, gold answer and generated answer (``str()`` of each). Send them
    with the project's chat client (:class:`agemem.core.httpclient.ChatClient`: ``messages -> reply``) at
    temperature 0 and read the reply with :func:`parse_j_label`. Mem0 judges categories 1-4 only."""
    user = f"Question: {question}\nGold answer: {gold_answer}\nGenerated answer: {generated_answer}"
    return [{"role": "system", "content": J_RUBRIC}, {"role": "user", "content": user}]


@dataclass(frozen=True)
class JLabel:
    """A judge reply read by :func:`parse_j_label`: ``score`` 1 (CORRECT), 0 (WRONG) or None (unreadable), and
    ``reason``, how it was read or why it could not be."""

    score: int | None
    reason: str


_LABEL_SCORES = {"CORRECT": 1, "WRONG": 0}
_LABEL_FIELD = re.compile(r"""["']?\blabel\b["']?\s*[:=]\s*["'*`]*\s*([A-Za-z]+)""", re.IGNORECASE)
_LABEL_WORD = re.compile(r"\b(CORRECT|WRONG)\b")
_NEGATED_LABEL = re.compile(r"\bnot\s+(?:correct|wrong)\b", re.IGNORECASE)
_DECORATION = " \t\r\n.!*_`'\"#:"


def _json_labels(text: str) -> list[Any]:
    """The values of every ``label`` key (any case) of the JSON objects found anywhere in ``text``."""
    decoder = json.JSONDecoder()
    labels = []
    position = text.find("{")
    while position != -1:
        try:
            value, end = decoder.raw_decode(text, position)
        except ValueError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            labels.extend(v for k, v in value.items() if isinstance(k, str) and k.strip().lower() == "label")
        position = text.find("{", end)
    return labels


def _verdict(labels: list[Any], how: str) -> JLabel:
    scores = set()
    for label in labels:
        key = label.strip(_DECORATION).upper() if isinstance(label, str) else None
        if key not in _LABEL_SCORES:
            return JLabel(None, f"unknown label {label!r} ({how})")
        scores.add(_LABEL_SCORES[key])
    if len(scores) > 1:
        return JLabel(None, f"conflicting labels {labels!r} ({how})")
    score = scores.pop()
    return JLabel(score, f"{'CORRECT' if score else 'WRONG'} ({how})")


def parse_j_label(reply: str | None) -> JLabel:
    """Read a J judge's reply into 1 (CORRECT), 0 (WRONG) or None with the reason; never raises.

    A leading ``<think>`` block is dropped. Then, in order, the first source that yields a label decides:

    1. the ``label`` values of the JSON objects in the reply (inside code fences or prose too);
    2. ``label: X`` / ``'label': 'X'`` / ``"label" = "X"`` written outside valid JSON;
    3. the words CORRECT / WRONG in capitals anywhere, or the whole reply being one of them in any case
       ("correct", "**Wrong.**").

    Labels are read case-insensitively, without surrounding quotes, ``*``, ``.``; a label other than CORRECT
    or WRONG, two different labels (two JSON objects, or both words in the prose), "not correct" / "not
    wrong", or no label at all gives None.
    """
    if reply is None:
        return JLabel(None, "no reply")
    text = strip_thinking(str(reply))
    if not text:
        return JLabel(None, "empty reply")
    labels = _json_labels(text)
    if labels:
        return _verdict(labels, "JSON label")
    fields = _LABEL_FIELD.findall(text)
    if fields:
        return _verdict(fields, "label field")
    bare = text.strip(_DECORATION).upper()
    if bare in _LABEL_SCORES:
        return _verdict([bare], "bare label")
    words = _LABEL_WORD.findall(text)
    if not words:
        return JLabel(None, "no CORRECT/WRONG label in the reply")
    if _NEGATED_LABEL.search(text):
        return JLabel(None, "negated label ('not correct' / 'not wrong')")
    if len(set(words)) > 1:
        return JLabel(None, "both CORRECT and WRONG in the reply")
    return _verdict(words[:1], "label word")


# --------------------------------------------------------------------------------------------- per question and per run

METRICS = ("locomo_f1", "mem0_f1", "bleu1", "j")
"""The per-question scores :func:`aggregate` averages by default (J comes from :func:`parse_j_label`)."""


def score_answer(prediction: str, answer: str | int | None, category: int | str) -> dict[str, Any]:
    """The rule-based scores of one answer, as :func:`aggregate` reads them: ``category`` (int),
    ``locomo_f1`` (:func:`locomo_f1`), and Mem0's ``mem0_f1`` and ``bleu1`` (None for category 5, which Mem0
    skips; ``answer`` may then be None)."""
    category = _category(category)
    if category == ADVERSARIAL:
        return {"category": category, "locomo_f1": locomo_adversarial(prediction), "mem0_f1": None, "bleu1": None}
    if answer is None:
        raise ValueError(f"a category-{category} question needs a gold answer")
    return {
        "category": category,
        "locomo_f1": locomo_f1(prediction, answer, category),
        "mem0_f1": mem0_f1(prediction, answer),
        "bleu1": bleu1(prediction, answer),
    }


def _summary(rows: list[Mapping[str, Any]], metrics: Sequence[str]) -> dict[str, Any]:
    """``{"count": rows, "mean": {metric: 100 · mean or None}, "n": {metric: rows with a value}}``."""
    means: dict[str, float | None] = {}
    counts: dict[str, int] = {}
    for metric in metrics:
        values = [float(row[metric]) for row in rows if row.get(metric) is not None]
        counts[metric] = len(values)
        means[metric] = 100.0 * (math.fsum(values) / len(values)) if values else None
    return {"count": len(rows), "mean": means, "n": counts}


def aggregate(rows: Iterable[Mapping[str, Any]], metrics: Sequence[str] = METRICS) -> dict[str, Any]:
    """Per-category and overall means ×100 of each metric over per-question ``rows``.

    Each row has ``category`` (1-5, int or string) and a value in [0, 1] (or None: not scored) per metric;
    a metric missing from a row counts as None. Every summary is ``{"count": number of rows, "mean":
    {metric: 100 · Σ values / n, or None when n = 0}, "n": {metric: n}}``, where the values are the metric's
    non-None ones. Returns:

    * ``by_category``: ``{category: summary}`` for each category present, in order;
    * ``overall``: categories 1-4 together, category 5 excluded (Mem0, A-Mem and Memory-R1 report this);
    * ``adversarial``: category 5 alone;
    * ``overall_with_adversarial``: all rows (LoCoMo's ``evaluation_stats.py`` "Overall accuracy"; LoCoMo
      counts an unscored question as 0 where this leaves it out, so compare with ``n``).
    """
    by_category: dict[int, list[Mapping[str, Any]]] = {}
    for row in rows:
        by_category.setdefault(_category(row["category"]), []).append(row)
    everything = [row for category in sorted(by_category) for row in by_category[category]]
    return {
        "by_category": {c: _summary(by_category[c], metrics) for c in sorted(by_category)},
        "overall": _summary([row for row in everything if _category(row["category"]) != ADVERSARIAL], metrics),
        "adversarial": _summary(by_category.get(ADVERSARIAL, []), metrics),
        "overall_with_adversarial": _summary(everything, metrics),
    }
