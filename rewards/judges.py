"""Judges: a rule-based one (EM/F1 and token recall, optionally embeddings), an LLM one over an
OpenAI-compatible endpoint, and one over a local transformers causal LM.

All three satisfy :class:`agemem.rewards.base.Judge`: three batched roles, one score in [0, 1] per item.

Rules of :class:`RuleJudge` (``C(x)`` is the *set* of content words of ``x``: the tokens of
``normalize_answer(x)`` minus :data:`STOPWORDS`; when every token is a stopword, all tokens are kept):

* answer: ``f1_score(prediction, gold)`` (official HotpotQA token F1) or ``exact_match`` (``answer_metric="em"``);
* memory: ``recall(f, e) = |C(f) ∩ C(e)| / |C(f)|`` for each supporting-fact sentence ``f`` and entry ``e``;
  with an encoder, ``s(f, e) = (1 - w) · recall(f, e) + w · clip(cos(f, e), 0, 1)`` (``w = embedding_weight``),
  else ``s = recall``; the score is ``max_f s(f, e)``, binarised to ``1[score >= memory_recall_threshold]``
  when a threshold is given; no usable fact (none, or none with any token) → 0;
* relevance (``relevance="recall"``): ``max_r |C(q) ∩ C(r)| / |C(q)|`` over retrieved items ``r``;
  (``relevance="cosine"``, needs an encoder): ``max_r clip(cos(q, r), 0, 1)``; binarised to
  ``1[score >= relevance_threshold]`` when a threshold is given; empty retrieval → 0.

:class:`LLMJudge` and :class:`TransformersJudge` send the rubric prompts of :func:`judge_messages`,
read the score with :func:`parse_score` and hand every item they cannot score (endpoint down after
retries, no parsable score) to a fallback judge (a :class:`RuleJudge` by default), counting it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from agemem.core.files import atomic_open
from agemem.core.httpclient import ChatClient, HTTPRequestError
from agemem.core.text import normalize_answer, strip_thinking
from agemem.rewards.base import AnswerItem, Judge, MemoryItem, RelevanceItem

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from agemem.core.encoders import Encoder

Role = Literal["answer", "memory", "relevance"]
ChatMessages = list[dict[str, str]]

# --------------------------------------------------------------------------------------------- metrics

_YES_NO = ("yes", "no", "noanswer")


def exact_match(prediction: str, gold: str) -> float:
    """Official HotpotQA EM: ``1.0 if normalize_answer(prediction) == normalize_answer(gold) else 0.0``."""
    return 1.0 if normalize_answer(prediction) == normalize_answer(gold) else 0.0


def f1_score(prediction: str, gold: str) -> float:
    """Official HotpotQA token F1 (``hotpot_evaluate_v1.f1_score``'s first value).

    With ``P``, ``G`` the token lists of the normalised prediction and gold and ``k`` the size of their
    multiset intersection: 0 when either normalised side is ``yes``/``no``/``noanswer`` and the two differ,
    0 when ``k == 0``; else ``precision = k / |P|``, ``recall = k / |G|``,
    ``F1 = 2 · precision · recall / (precision + recall)``.
    """
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in _YES_NO or ref in _YES_NO) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    num_same = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(pred_tokens)
    recall = 1.0 * num_same / len(ref_tokens)
    return (2 * precision * recall) / (precision + recall)


_STOPWORD_TEXT = """
    a an the and or but if then else of at by for with about against between into through during before after
    above below to from up down in out on off over under again further once here there when where why how all any
    both each few more most other some such no nor not only own same so than too very s t can will just don should
    now i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is are
    was were be been being have has had having do does did doing would could also as while because until
    """
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
"""English function words dropped before token recall (normalised forms: no punctuation, lower case)."""


def content_words(text: str) -> frozenset[str]:
    """``C(text)``: normalised tokens minus :data:`STOPWORDS`; all normalised tokens if that leaves none."""
    tokens = normalize_answer(text).split()
    content = frozenset(t for t in tokens if t not in STOPWORDS)
    return content or frozenset(tokens)


def token_recall(needle: str, haystack: str) -> float | None:
    """``|C(needle) ∩ C(haystack)| / |C(needle)|``; None when ``needle`` has no tokens at all."""
    wanted = content_words(needle)
    if not wanted:
        return None
    return len(wanted & content_words(haystack)) / len(wanted)


# --------------------------------------------------------------------------------------------- rule judge


class RuleJudge:
    """Scores by rule (see the module docstring for the formulas); no model unless an encoder is given."""

    def __init__(
        self,
        encoder: Encoder | None = None,
        *,
        answer_metric: Literal["f1", "em"] = "f1",
        embedding_weight: float = 0.5,
        memory_recall_threshold: float | None = None,
        relevance: Literal["recall", "cosine"] = "recall",
        relevance_threshold: float | None = None,
    ):
        if answer_metric not in ("f1", "em"):
            raise ValueError(f"answer_metric={answer_metric!r} must be 'f1' or 'em'")
        if relevance not in ("recall", "cosine"):
            raise ValueError(f"relevance={relevance!r} must be 'recall' or 'cosine'")
        if relevance == "cosine" and encoder is None:
            raise ValueError("relevance='cosine' needs an encoder")
        if not 0.0 <= embedding_weight <= 1.0:
            raise ValueError(f"embedding_weight={embedding_weight} must be in [0, 1]")
        self.encoder = encoder
        self.answer_metric = answer_metric
        self.embedding_weight = embedding_weight
        self.memory_recall_threshold = memory_recall_threshold
        self.relevance = relevance
        self.relevance_threshold = relevance_threshold
        self.name = f"rule:{answer_metric}:{relevance}" + (f":{encoder.name}" if encoder is not None else "")

    def answer_scores(self, items: Sequence[AnswerItem]) -> list[float]:
        metric = f1_score if self.answer_metric == "f1" else exact_match
        return [metric(item.prediction, item.gold) for item in items]

    def memory_scores(self, items: Sequence[MemoryItem]) -> list[float]:
        pairs = [(item.content, fact) for item in items for fact in item.supporting_facts]
        cosines = self._pair_cosines(pairs) if self.embedding_weight > 0 else None  # weight 0: skip the encoder
        scores, k = [], 0
        for item in items:
            best = None
            for fact in item.supporting_facts:
                recall = token_recall(fact, item.content)
                cosine = cosines[k] if cosines is not None else None
                k += 1
                if recall is None:  # an empty fact carries nothing to store
                    continue
                if cosine is not None:
                    w = self.embedding_weight
                    recall = (1.0 - w) * recall + w * cosine
                best = recall if best is None else max(best, recall)
            scores.append(_threshold(best or 0.0, self.memory_recall_threshold))
        return scores

    def relevance_scores(self, items: Sequence[RelevanceItem]) -> list[float]:
        if self.relevance == "cosine":
            cosines = self._pair_cosines([(item.question, text) for item in items for text in item.retrieved])
            assert cosines is not None
            scores, k = [], 0
            for item in items:
                n = len(item.retrieved)
                scores.append(max(cosines[k : k + n], default=0.0))
                k += n
        else:
            scores = [
                max((token_recall(item.question, r) or 0.0 for r in item.retrieved), default=0.0) for item in items
            ]
        return [_threshold(s, self.relevance_threshold) for s in scores]

    def _pair_cosines(self, pairs: list[tuple[str, str]]) -> list[float] | None:
        """``clip(cos(a, b), 0, 1)`` for each pair, in one encoder call; None without an encoder."""
        if self.encoder is None:
            return None
        if not pairs:
            return []
        texts = list(dict.fromkeys(t for pair in pairs for t in pair))
        index = {t: i for i, t in enumerate(texts)}
        vectors_ND = np.asarray(self.encoder.encode(texts), dtype=np.float64)
        left = vectors_ND[[index[a] for a, _ in pairs]]
        right = vectors_ND[[index[b] for _, b in pairs]]
        return np.clip(np.sum(left * right, axis=1), 0.0, 1.0).tolist()


def _threshold(score: float, threshold: float | None) -> float:
    score = float(min(1.0, max(0.0, score)))
    if threshold is None:
        return score
    return 1.0 if score >= threshold else 0.0


# --------------------------------------------------------------------------------------------- prompts

_REPLY_FORMAT = (
    "Reply with one line and nothing else: 'Score: X', where X is a number from 0 to 1 "
    "(0 = not at all, 1 = completely)."
)

ANSWER_RUBRIC = (
    "You grade a question-answering system. Decide whether the predicted answer means the same as the "
    "reference answer for the question. Ignore differences of case, punctuation, articles and phrasing; "
    "a prediction that contains the reference plus unrelated or wrong claims, or that gives only part of "
    "it, earns partial credit; a different entity, number or yes/no value earns 0. " + _REPLY_FORMAT
)
MEMORY_RUBRIC = (
    "You grade a note an assistant saved to its long-term memory. Given the key facts the note should "
    "preserve, decide how much of their content (names, dates, numbers, relations) the note carries, "
    "possibly in other words. A note that holds every key fact scores 1, one that holds none scores 0, "
    "partial coverage of the most relevant fact scores in between. " + _REPLY_FORMAT
)
RELEVANCE_RUBRIC = (
    "You grade a memory retrieval. Given a question and the memories that were retrieved for it, decide "
    "how useful the retrieved memories are for answering the question: 1 if at least one of them bears "
    "directly on it, 0 if none is related, in between for loosely related ones. " + _REPLY_FORMAT
)


def judge_messages(role: Role, item: Any) -> ChatMessages:
    """The chat messages asking a model to score ``item`` in ``role``."""
    if role == "answer":
        system = ANSWER_RUBRIC
        user = f"Question: {item.question}\nReference answer: {item.gold}\nPredicted answer: {item.prediction}"
    elif role == "memory":
        facts = "\n".join(f"- {fact}" for fact in item.supporting_facts) or "- (none)"
        system = MEMORY_RUBRIC
        user = f"Key facts:\n{facts}\n\nSaved note:\n{item.content}"
    elif role == "relevance":
        retrieved = "\n".join(f"{i}. {text}" for i, text in enumerate(item.retrieved, 1)) or "(nothing retrieved)"
        system = RELEVANCE_RUBRIC
        user = f"Question: {item.question}\n\nRetrieved memories:\n{retrieved}"
    else:
        raise ValueError(f"unknown judge role {role!r}")
    return [{"role": "system", "content": system}, {"role": "user", "content": user + "\n\nScore:"}]


_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_SCORE_EXPR = re.compile(
    rf"(?P<label>score\s*(?:is|of|[:=])?\s*)?(?P<x>{_NUMBER})\s*(?:(?P<pct>%)|(?:/|out\s+of)\s*(?P<y>{_NUMBER}))?",
    re.IGNORECASE,
)


def parse_score(text: str) -> float | None:
    """The score in a judge's reply, clipped to [0, 1]; None when there is none.

    Accepted forms: ``0.8``, ``Score: 0.8``, ``8/10``, ``4 out of 5``, ``80%``, ``1``, ``0``. A leading
    ``<think>`` block is ignored. Of several numbers, the last one labelled ``score`` wins, else the last
    one. A bare number above 1 has no known scale (``Score: 7`` of 5? of 10?) and is unparsable; a
    fraction with denominator 0 too.
    """
    text = strip_thinking(text or "")
    matches = list(_SCORE_EXPR.finditer(text))
    if not matches:
        return None
    labelled = [m for m in matches if m.group("label")]
    match = (labelled or matches)[-1]
    value = float(match.group("x"))
    if match.group("pct"):
        value /= 100.0
    elif match.group("y") is not None:
        denominator = float(match.group("y"))
        if denominator <= 0:
            return None
        value /= denominator
    elif value > 1.0:
        return None
    return min(1.0, max(0.0, value))


# --------------------------------------------------------------------------------------------- model judges


class _ModelJudge:
    """Shared machinery: prompt each item, parse its score, and hand failures to the fallback in one batch.

    ``complete(messages) -> str | None`` (None: the backend failed) is the one backend-specific part;
    :class:`LLMJudge` also overrides ``_complete_all`` to send a batch concurrently.
    """

    name: str

    def __init__(self, fallback: Judge | None, complete: Callable[[ChatMessages], str | None]):
        self.fallback: Judge = fallback if fallback is not None else RuleJudge()
        self._complete = complete
        self.counters: dict[str, int] = {"requests": 0, "cache_hits": 0, "errors": 0, "unparsable": 0, "fallbacks": 0}
        self._lock = threading.Lock()

    def answer_scores(self, items: Sequence[AnswerItem]) -> list[float]:
        return self._scores("answer", items, self.fallback.answer_scores)

    def memory_scores(self, items: Sequence[MemoryItem]) -> list[float]:
        return self._scores("memory", items, self.fallback.memory_scores)

    def relevance_scores(self, items: Sequence[RelevanceItem]) -> list[float]:
        return self._scores("relevance", items, self.fallback.relevance_scores)

    def complete_all(self, prompts: Sequence[ChatMessages]) -> list[str | None]:
        """The judge model's raw replies to ``prompts`` (another benchmark's own rubric: LoCoMo's J), with this
        judge's concurrency, cache and counters; None where the backend failed."""
        return self._complete_all(list(prompts))

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counters[key] += n

    def _scores(self, role: Role, items: Sequence[Any], fallback: Callable[[list[Any]], list[float]]) -> list[float]:
        replies = self._complete_all([judge_messages(role, item) for item in items])
        scores: list[float | None] = []
        for reply in replies:
            score = None if reply is None else parse_score(reply)
            if reply is not None and score is None:
                self._count("unparsable")
            scores.append(score)
        missing = [i for i, score in enumerate(scores) if score is None]
        if missing:
            self._count("fallbacks", len(missing))
            for i, score in zip(missing, fallback([items[i] for i in missing])):
                scores[i] = score
        return [float(s) for s in scores]  # type: ignore[arg-type]

    def _complete_all(self, prompts: list[ChatMessages]) -> list[str | None]:
        return [self._complete(messages) for messages in prompts]


class LLMJudge(_ModelJudge):
    """Scores with a chat model behind an OpenAI-compatible ``/chat/completions`` endpoint (``client``).

    A batch's requests run concurrently (``concurrency`` threads), each retried with exponential backoff
    by the ``openai`` SDK (:mod:`agemem.core.httpclient`). Endpoint failures never raise: the item goes to ``fallback``.
    With ``cache_dir``, each reply is stored as ``<cache_dir>/<sha256(model, max_tokens, temperature,
    messages)>.json`` (atomic write) and reused instead of a request, so one cache serves every run.
    ``counters``: ``requests`` (items sent to the endpoint), ``cache_hits``, ``errors`` (endpoint failed after
    retries), ``unparsable`` (a reply without a score), ``fallbacks`` (items the fallback judge scored).
    """

    def __init__(
        self,
        client: ChatClient,
        *,
        concurrency: int = 8,
        cache_dir: str | os.PathLike[str] | None = None,
        fallback: Judge | None = None,
    ):
        super().__init__(fallback, self._request)
        if concurrency < 1:
            raise ValueError(f"concurrency={concurrency} must be >= 1")
        self.client = client
        self.model = client.model
        self.concurrency = concurrency
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.name = f"llm:{client.model}"

    def cache_key(self, messages: ChatMessages) -> str:
        # every setting that changes the reply is in the key, so runs with other judge settings never share one
        request = {
            "model": self.model,
            "max_tokens": getattr(self.client, "max_tokens", None),
            "temperature": getattr(self.client, "temperature", None),
            "messages": messages,
        }
        blob = json.dumps(request, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()

    def _complete_all(self, prompts: list[ChatMessages]) -> list[str | None]:
        if len(prompts) <= 1 or self.concurrency == 1:
            return [self._complete(messages) for messages in prompts]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(prompts))) as pool:
            return list(pool.map(self._complete, prompts))  # map keeps the input order

    def _request(self, messages: ChatMessages) -> str | None:
        path = self.cache_dir / f"{self.cache_key(messages)}.json" if self.cache_dir is not None else None
        if path is not None:
            cached = _read_cache(path)
            if cached is not None:
                self._count("cache_hits")
                return cached
        self._count("requests")
        try:
            reply = self.client(messages)
        except HTTPRequestError:
            self._count("errors")
            return None
        if path is not None:
            _write_cache(path, {"model": self.model, "reply": reply})
        return reply


def _read_cache(path: Path) -> str | None:
    try:
        return str(json.loads(path.read_text())["reply"])
    except (OSError, ValueError, KeyError, TypeError):  # absent, or a torn/foreign file: ask again
        return None


def _write_cache(path: Path, record: dict[str, Any]) -> None:
    with atomic_open(path) as handle:  # a concurrent reader sees the whole file or none
        json.dump(record, handle)


class TransformersJudge(_ModelJudge):
    """Scores with a local causal LM: the rubric prompts through its chat template, greedy decoding.

    Items are generated one at a time; a reply without a score goes to ``fallback`` (``counters`` as in
    :class:`LLMJudge`; ``requests`` counts generations).
    """

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        *,
        max_new_tokens: int = 16,
        fallback: Judge | None = None,
    ):
        from agemem.core.summarizers import TransformersChatGenerator

        super().__init__(fallback, self._generate_reply)
        self.model = model
        self.tokenizer = tokenizer
        self.max_new_tokens = max_new_tokens
        self._generate = TransformersChatGenerator(model, tokenizer, max_new_tokens=max_new_tokens, temperature=0.0)
        config = getattr(model, "config", None)
        self.name = f"transformers:{getattr(config, '_name_or_path', '') or type(model).__name__}"

    def _generate_reply(self, messages: ChatMessages) -> str | None:
        self._count("requests")
        return self._generate(messages)
