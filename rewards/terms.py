"""The AgeMem reward terms (paper Appendix A.2, arXiv 2601.01885v1, Eqs. 16-26), each a small pure function.

Every function takes plain numbers or records from a finished trajectory and returns a
float; the judge calls happen before (:mod:`agemem.rewards.composite`), so the terms stay pure and
testable by hand.

Four terms read what the agent *did*, and the paper's letter pays for calls, not effects: a Filter_context
that removes nothing is context management, an Update_memory that writes the same text back is maintenance,
a fact stored twice is two high-quality adds, and the question's key items in a kept distractor are
preservation. Each has two readings here, chosen by ``reward.terms``: ``paper`` (the letter of Eqs. 20, 21, 23,
24, for reproduction) and ``effects`` (default: only what changed the context the agent answers in, or the meaning
of what memory holds, and only what the question needs, counts):

| term | paper | effects |
|---|---|---|
| preventive | :func:`management_steps_paper` | :func:`management_steps_effective` |
| preservation | :func:`preservation_items_paper` | :func:`preservation_items_needed` |
| storage | :func:`stored_entries_paper` | :func:`stored_entries_held` |
| maintenance | :func:`maintenance_count_paper` | :func:`maintenance_count_effective` |
| maintenance pays | :func:`maintenance_reward_paper` | :func:`maintenance_reward_effective` |
| compression, preservation paid | :func:`context_state_share_paper` | :func:`context_state_share_by_answer` |

A third reading, ``current``, is ``effects`` with storage judged against every fact the task holds true
(:func:`zero_stale_entries`: a stale entry scores 0) and maintenance paid for the superseded facts memory was
brought up to date on (:func:`stale_facts_fixed`, :func:`maintenance_reward_current`), for tasks that list them.

Both readings look for preservation items in the same place, :func:`kept_context_text`, with the same matcher,
:func:`contains_item` (whole words; never the system prompt, the tool schemas or the agent's own messages).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agemem.core.context import SUMMARY_PREFIX

if TYPE_CHECKING:
    from agemem.core.env import FilterRecord, MemoryOpRecord, SummaryRecord


def task_reward(answer_score: float | None) -> float:
    """R_task = S_judge, the judge's score of the final answer in [0, 1]; P_no-answer = −1 when no answer was given
    (Eq. 17)."""
    return -1.0 if answer_score is None else float(answer_score)


def compression_reward(tokens_used: int, token_budget: int) -> float:
    """R_compression = max(0, 1 − T_used / T_max), T_used the context tokens at answer time (Eq. 19)."""
    return max(0.0, 1.0 - tokens_used / token_budget)


def context_state_share_paper(answer_score: float | None) -> float:
    """The share of R_compression and R_preservation paid under Eqs. 19 and 21's letter: all of it, whatever the
    answer (1)."""
    return 1.0


def context_state_share_by_answer(answer_score: float | None) -> float:
    """The share of R_compression and R_preservation paid by effect: the answer's judge score S in [0, 1], 0 without
    an answer, so R_compression = S * max(0, 1 - T_used / T_max) and R_preservation = S * (share of items kept).

    Why: both terms read the *state* of the context at answer time, not anything the agent did to it. A policy that
    stores nothing, retrieves nothing and answers "OK" holds a short context, and the context the environment gave
    it (Stage-2 look-alikes naming the same people) holds key items without its doing: under the letter it earned
    +0.34 of R_context (compression 0.89, preservation 0.13) for an episode with no useful act and a wrong answer,
    more than a warm start that tried (seed 3 of the stored-lookup recipe collapsed into that, docs/results.md). A
    short context is worth paying when the answer it held was right: the efficiency of a correct answer, as the
    paper motivates compression. Preventive is an act (management that reached the answer) and stays unscaled."""
    return 0.0 if answer_score is None else float(answer_score)


def preventive_reward(management_steps: Sequence[int], first_overflow_step: int | None) -> float:
    """R_preventive (Eq. 20): 1 when context management happened (``management_steps``, from
    :func:`management_steps_paper` or :func:`management_steps_effective`) before the context first exceeded the
    budget — at any step when it never did — else 0 (exceeded, or never managed)."""
    if first_overflow_step is None:
        return 1.0 if management_steps else 0.0
    return 1.0 if any(step < first_overflow_step for step in management_steps) else 0.0


_MONTHS = "January|February|March|April|May|June|July|August|September|October|November|December"
_KEY_ITEM = re.compile(
    rf"\b(?:{_MONTHS})(?:\s+\d{{1,2}}\b)?(?:,?\s+\d{{4}}\b)?"  # dates: "March 3, 1999", "May 1999"
    r"|\b\d+(?:[.,]\d+)*\b"  # numbers and years
    r"|\b[A-Z][\w'’.-]*(?:\s+(?:of|the|de|la|von|van)?\s*[A-Z][\w'’.-]*)*"  # capitalised names and places
)
_QUESTION_WORDS = frozenset(
    [
        # question words, articles and prepositions
        "What",
        "Which",
        "Who",
        "Whom",
        "Whose",
        "When",
        "Where",
        "Why",
        "How",
        "Is",
        "Are",
        "Was",
        "Were",
        "Do",
        "Does",
        "Did",
        "In",
        "On",
        "At",
        "The",
        "A",
        "An",
        "Of",
        "For",
        "And",
        "Or",
        "To",
        "By",
        "From",
        "With",
        "As",
        "Than",
        "That",
        "This",
        "These",
        "Those",
        "Name",
        # pronouns and words that start sentences: capitalised, never an item
        "It",
        "Its",
        "He",
        "His",
        "She",
        "Her",
        "They",
        "Their",
        "Them",
        "We",
        "Our",
        "I",
        "My",
        "You",
        "Your",
        "There",
        "Here",
        "Then",
        "But",
        "So",
        "If",
        "Also",
    ]
)
_ABBREVIATIONS = frozenset(
    [
        "St.",
        "Mr.",
        "Mrs.",
        "Ms.",
        "Dr.",
        "Jr.",
        "Sr.",
        "Mt.",
        "Ft.",
        "Prof.",
        "Gen.",
        "Col.",
        "Lt.",
        "Sgt.",
        "Rev.",
        "No.",
        "vs.",
    ]
)


def _ends_sentence(word: str) -> bool:
    """A word ending in "." ends its sentence unless it is an initial ("J."), an abbreviation with inner dots
    ("U.S.") or a listed title ("St.", "Dr.")."""
    if not word.endswith("."):
        return False
    stem = word[:-1]
    return not (len(stem) == 1 or "." in stem or word in _ABBREVIATIONS)


def _split_sentences(words: list[str]) -> list[list[str]]:
    """A run of capitalised words cut after each word that ends a sentence ("Paris. It" → "Paris.", "It")."""
    runs: list[list[str]] = [[]]
    for word in words:
        runs[-1].append(word)
        if _ends_sentence(word):
            runs.append([])
    return [run for run in runs if run]


def key_items(question: str) -> list[str]:
    """The question's key items: named entities, places, numbers and dates.

    Rule: dates (a month name with optional day and year), numbers, and runs of capitalised
    words (joined across of/the/de/la/von/van, never across a sentence end: "Paris. It" is "Paris", then "It") —
    minus a leading question word, article or pronoun, and minus runs that are only such words. Deduplicated, in
    order of appearance.
    """
    items: list[str] = []
    for match in _KEY_ITEM.finditer(question):
        for words in _split_sentences(match.group(0).split()):
            while words and words[0] in _QUESTION_WORDS:
                words = words[1:]
            item = " ".join(words).rstrip(".,'’")
            if item and item not in items:
                items.append(item)
    return items


def contains_item(item: str, text: str) -> bool:
    """Whether ``text`` holds ``item`` as whole words, case-insensitively, with any whitespace between its words:
    "He" is not in "the", "Ed Wood" is in "ed\\nwood", "1996" is not in "19961"."""
    words = [re.escape(word) for word in item.split()]
    return bool(words) and re.search(r"(?<!\w)" + r"\s+".join(words) + r"(?!\w)", text, re.IGNORECASE) is not None


KEPT_KINDS = frozenset(["chat", "fact", "distractor"])
"""Context message kinds that carry what the agent was told and kept: user turns, the question aside (summaries are
credited apart: :func:`summary_sources`)."""
RETRIEVAL_ORIGINS = frozenset(["tool_result:Retrieve_memory", "introspection", "rag"])
"""Context message origins (:func:`agemem.core.env.message_origin`) that show memory contents."""


def _origin(message: Mapping[str, Any]) -> str:
    kind = message.get("kind", "chat")
    return f"tool_result:{message.get('name')}" if kind == "tool_result" else kind


def _memory_contents(tool_text: str) -> list[str]:
    """The memory contents a Retrieve_memory result showed (its JSON ``memories[].content``); none when unreadable."""
    try:
        payload = json.loads(tool_text)
    except json.JSONDecodeError:
        return []
    memories = payload.get("memories", []) if isinstance(payload, dict) else []
    return [str(m["content"]) for m in memories if isinstance(m, dict) and "content" in m]


def kept_context_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """Where R_preservation looks first: what the agent kept, as it was given, of the content at answer time.

    From the answer-time context messages (``role``, ``kind``, ``name``, ``content``): the user turns other than the
    question (facts, distractors, chat: :data:`KEPT_KINDS`) and the memory contents shown by retrievals
    (:data:`RETRIEVAL_ORIGINS`). Not the system prompt or the tool schemas (never in ``messages``), not the question,
    not the agent's own replies (its thoughts and call arguments), not the results of its other calls, and not
    summaries, which the agent writes itself (:func:`summary_sources` credits them). One blank line between pieces,
    so no item spans two of them."""
    pieces: list[str] = []
    for message in messages:
        origin = _origin(message)
        if message.get("role") == "user" and origin in KEPT_KINDS:
            pieces.append(str(message.get("content", "")))
        elif origin in RETRIEVAL_ORIGINS:
            pieces.extend(_memory_contents(str(message.get("content", ""))))
    return "\n\n".join(pieces)


def given_text(contents: Sequence[str], origins: Sequence[str]) -> str:
    """The part of an edited span the agent was given (not :func:`is_agents_own`), one blank line apart; all of it
    for a record that predates the origins."""
    if not origins:
        return "\n\n".join(contents)
    return "\n\n".join(c for c, o in zip(contents, origins) if not is_agents_own(o))


def summary_sources(messages: Sequence[Mapping[str, Any]], summaries: Sequence[SummaryRecord]) -> list[tuple[str, str]]:
    """For each summary still in the answer-time context: (its text, the given content it replaced —
    :func:`given_text` of its record). A summary is the agent's own writing: it preserves an item only where the
    content it summarised held that item (:func:`preservation_reward`)."""
    sources = {r.summary: given_text(r.replaced_contents, r.replaced_origins) for r in summaries}
    return [
        (str(m["content"]), sources.get(str(m["content"]), ""))
        for m in messages
        if m.get("kind") == "summary" and m.get("role") == "user"
    ]


def preservation_reward(items: Sequence[str], context_text: str, summaries: Sequence[tuple[str, str]] = ()) -> float:
    """R_preservation (Eq. 21): the fraction of the key items still present at answer time (:func:`contains_item`:
    whole words, case-insensitively) — directly in what the agent kept (``context_text``, :func:`kept_context_text`:
    a kept message or a retrieved memory), or via a retained summary: in a summary's text *and* in the given content
    it replaced (``summaries``, :func:`summary_sources`), so a summary cannot launder the agent's own words (the
    question it echoed in a call) into preserved content. 1 when there are no key items. (Eq. 21 writes the indicator
    1_preserve that the items remain; the fraction equals it with one item and grades partial preservation.)"""
    if not items:
        return 1.0

    def kept(item: str) -> bool:
        return contains_item(item, context_text) or any(
            contains_item(item, text) and contains_item(item, source) for text, source in summaries
        )

    return sum(kept(item) for item in items) / len(items)


def preservation_items_paper(question: str, facts: Sequence[str], distractors: Sequence[str]) -> list[str]:
    """The items R_preservation looks for, as the paper words Eq. 21: the question's key items (:func:`key_items`).

    Distractors are picked for their similarity to the question and often name its items, so keeping a
    distractor can raise this and filtering one can lower it."""
    return key_items(question)


def preservation_items_needed(question: str, facts: Sequence[str], distractors: Sequence[str]) -> list[str]:
    """The items the question needs: ``I = K(F) \\ K(D)``, the key items of the supporting-fact sentences ``F`` that
    no Stage-2 distractor ``D`` mentions (whole words, case-insensitive), so a retained distractor adds nothing to
    R_preservation. When every fact item also appears in a distractor, ``I = K(F)``; with no supporting fact,
    the paper's items (:func:`preservation_items_paper`)."""
    fact_items: list[str] = []
    for fact in facts:
        fact_items.extend(item for item in key_items(fact) if item not in fact_items)
    if not fact_items:
        return preservation_items_paper(question, facts, distractors)
    shown = "\n\n".join(distractors)
    distinctive = [item for item in fact_items if not contains_item(item, shown)]
    return distinctive or fact_items


def management_steps_paper(
    summaries: Sequence[SummaryRecord], filters: Sequence[FilterRecord], resets: Sequence[int] = ()
) -> list[int]:
    """The steps of every Summary_context and Filter_context call (Eq. 20's letter: a call is management, whatever
    it changed and whether or not a reset later threw its result away; ``resets`` is unused)."""
    return [r.step for r in summaries] + [r.step for r in filters]


AGENT_OWN_ORIGINS = frozenset(["action", "format_error"])
"""Context message origins that are the agent's own: its replies, and the env's feedback on their format. The results
of its calls count as its own too (``tool_result:<tool>``), except a retrieval's, which shows memory."""


def is_agents_own(origin: str) -> bool:
    """Whether a context message of this origin (:func:`agemem.core.env.message_origin`) is the agent's own output:
    a reply, format feedback, or the acknowledgement of a call other than Retrieve_memory."""
    return origin in AGENT_OWN_ORIGINS or (origin.startswith("tool_result:") and origin not in RETRIEVAL_ORIGINS)


def survives_resets(step: int, resets: Sequence[int]) -> bool:
    """Whether an edit made at ``step`` is still in the context at the answer: no reset came at or after it
    (``resets`` holds the step count when each reset happened, so a reset r throws away the edits of steps <= r)."""
    return all(reset < step for reset in resets)


def shrank_context(tokens_before: int | None, tokens_after: int | None) -> bool:
    """Whether the edit left the context shorter: T_after < T_before, the policy-tokenizer counts just before and just
    after it. True when a record predates the counts (both None), so old trajectories keep the earlier rule."""
    if tokens_before is None or tokens_after is None:
        return True
    return tokens_after < tokens_before


def managed_given_content(origins: Sequence[str], touched: int) -> bool:
    """Whether the edit touched content the agent was given, not only its own output: some removed or summarised
    message is not :func:`is_agents_own`. ``touched`` (the number of messages edited) decides for a record that
    predates the origins (empty ``origins``)."""
    if not origins:
        return touched > 0
    return any(not is_agents_own(origin) for origin in origins)


def summary_shortened(summary: str, replaced_contents: Sequence[str], origins: Sequence[str]) -> bool:
    """Whether a summary is shorter than the given content it replaced: fewer words (:func:`meaning`) than
    :func:`given_text` of its span. A summary that restates its span — the agent's own replies and tool results
    included — is longer than what it was given, even where the chat template's per-message overhead makes the edit
    itself save tokens."""
    return len(meaning(summary).split()) < len(meaning(given_text(replaced_contents, origins)).split())


def management_steps_effective(
    summaries: Sequence[SummaryRecord], filters: Sequence[FilterRecord], resets: Sequence[int] = ()
) -> list[int]:
    """The steps of the Summary_context and Filter_context calls whose effect reaches the answer (Eq. 20 by effect).

    A call counts when all three hold: it removed or summarised content the agent was given, not only its own
    replies and acknowledgements (:func:`managed_given_content`); it made the context shorter: the edit's T_after <
    T_before (:func:`shrank_context`), and a summary has fewer words than the given content it replaced
    (:func:`summary_shortened`: a summary that made the context longer does not count); and no reset of the
    short-term context came at or after it (:func:`survives_resets`: Stage-1 management, erased by the reset before
    Stage 2, does not count). A no-op call (nothing matched, an empty span) counts nothing."""

    def effective(step: int, origins: Sequence[str], touched: int, before: int | None, after: int | None) -> bool:
        return (
            touched > 0
            and managed_given_content(origins, touched)
            and shrank_context(before, after)
            and survives_resets(step, resets)
        )

    return [
        r.step
        for r in summaries
        if effective(r.step, r.replaced_origins, len(r.replaced_contents), r.tokens_before, r.tokens_after)
        and summary_shortened(r.summary.removeprefix(SUMMARY_PREFIX), r.replaced_contents, r.replaced_origins)
    ] + [
        r.step
        for r in filters
        if effective(r.step, r.removed_origins, len(r.removed_contents), r.tokens_before, r.tokens_after)
    ]


def maintenance_count_paper(ops: Sequence[MemoryOpRecord]) -> int:
    """Successful Update_memory and Delete_memory calls (Eq. 24's letter), whatever they changed."""
    return sum(op.ok and op.op in ("update", "delete") for op in ops)


_WORD = re.compile(r"\w+(?:[.,:'’/-]\w+)*")


def meaning(text: str) -> str:
    """The text up to formatting: its casefolded words (runs of letters and digits, joined through an inner
    ``. , : ' ’ / -``), one space apart. "Ada lives in Oslo." and " ada  LIVES in oslo" read the same; "3.5" and
    "35", "1921" and "1922", "is" and "is not" do not.

    Why words and not encoder similarity: a change of meaning is very often one word — a number, a name, a
    negation — that moves the cosine of two sentence embeddings by less than any threshold that also ignores a
    trailing ".", while the word sequence never misses a changed word, needs no model, and can be checked by hand.
    Its limit: a paraphrase (the same meaning in other words) reads as a change."""
    return " ".join(_WORD.findall(text.casefold()))


def _memory_at_stages(ops: Sequence[MemoryOpRecord]) -> list[tuple[int, dict[str, str], dict[str, str], set[str]]]:
    """Per stage in order: (stage, the entries held when it began, those held when it ended, the ids its updates
    rewrote), replaying the successful operations (id → content). An entry an Update/Delete names that the episode
    never added was in memory before the episode; it joins the stage's starting memory with its earlier text."""
    held: dict[str, str] = {}
    added: set[str] = set()
    stages = []
    for stage in sorted({op.stage for op in ops}):
        mine = [op for op in ops if op.stage == stage and op.ok and op.memory_id is not None]
        for op in mine:
            if op.op == "add":
                added.add(op.memory_id)
            elif op.memory_id not in held and op.memory_id not in added:
                held[op.memory_id] = (op.previous_content if op.op == "update" else op.content) or ""
                added.add(op.memory_id)
        start, rewritten = dict(held), set()
        for op in mine:
            if op.op == "delete":
                held.pop(op.memory_id, None)
            else:
                held[op.memory_id] = op.content
                rewritten |= {op.memory_id} if op.op == "update" and op.memory_id in start else set()
        stages.append((stage, start, dict(held), rewritten))
    return stages


def maintenance_count_effective(ops: Sequence[MemoryOpRecord]) -> int:
    """The meanings maintenance changed (Eq. 24 by effect), summed over the stages.

    Per stage, with H_start and H_end the sets of :func:`meaning` of the entries memory held when the stage began
    and ended, and W the meanings its updates wrote into entries of H_start (still held at the end):

        changed = |H_start \\ H_end| + |W \\ H_start|

    a meaning memory no longer holds, plus a new meaning written over an entry it held. So an update that writes
    the same words back (case, spacing, punctuation aside), a delete followed by an add of the same words, the
    deletion of one of two copies (the meaning is still held: a fact the agent stored twice, then deleted once,
    changed nothing), and an entry added and changed or deleted within one stage count nothing; ``ops`` are the
    episode's memory operations in order (failed ones are skipped). Deleting or rewriting a distinct fact the agent
    stored in an earlier stage does count, as does the paper's own example (Appendix B.1) of an entry updated when
    the user's preference changes."""
    changed = 0
    for _, start, end, rewritten in _memory_at_stages(ops):
        held_start = {meaning(text) for text in start.values()}
        held_end = {meaning(text) for text in end.values()}
        written = {meaning(end[i]) for i in rewritten if i in end}
        changed += len(held_start - held_end) + len(written - held_start)
    return changed


def stored_entries_paper(ops: Sequence[MemoryOpRecord]) -> list[str]:
    """What R_storage judges under Eq. 23's letter: the content of every successful Stage-1 Add_memory, in order —
    N_total counts adds, so a fact stored twice is two high-quality entries, and an entry deleted later still
    counts."""
    return [op.content for op in ops if op.op == "add" and op.stage == 1 and op.ok]


def stored_entries_held(ops: Sequence[MemoryOpRecord]) -> list[str]:
    """What R_storage judges by effect: the distinct meanings (:func:`meaning`) that memory held when Stage 1 ended,
    one entry's text each (the first held), in order. How many adds it took does not count: a fact stored twice is
    one entry, an entry added and deleted within Stage 1 none; Stage-1 updates count with their final text."""
    entries: dict[str, str] = {}
    for stage, _, end, _ in _memory_at_stages(ops):
        if stage == 1:
            for text in end.values():
                entries.setdefault(meaning(text), text)
    return list(entries.values())


def stage1_entries_at_end(ops: Sequence[MemoryOpRecord]) -> list[str]:
    """The memory Stage 1 built, as the episode left it: of the entries (by id) memory held when Stage 1 ended, those
    still held at the end, each with its final text (after later updates), as distinct meanings (:func:`meaning`),
    one text each (the first held), in order. Entries added after Stage 1 are not in it, so Q over it
    (:func:`maintenance_reward_effective`) changes only by maintenance of what Stage 1 stored. Empty when Stage 1
    stored nothing."""
    stages = _memory_at_stages(ops)
    built = next((end for stage, _, end, _ in stages if stage == 1), {})
    final = stages[-1][2] if stages else {}
    entries: dict[str, str] = {}
    for memory_id, text in final.items():
        if memory_id in built:
            entries.setdefault(meaning(text), text)
    return list(entries.values())


@dataclass(frozen=True)
class Supersession:
    """One fact a later message of the task changed: ``stale`` (as first stated) and ``by`` (the sentence that
    changed it), from the task's ``metadata["superseded_facts"]``."""

    stale: str
    by: str


def carries(content: str, sentence: str) -> bool:
    """Whether ``content`` states ``sentence`` word for word up to formatting (:func:`meaning` contained as whole
    words). "Ada lives in Oslo. Ada plays chess." carries "ada lives in oslo"; "Ada has moved to Lima." does not."""
    wanted = meaning(sentence)
    return bool(wanted) and f" {wanted} " in f" {meaning(content)} "


def is_stale(content: str, supersessions: Sequence[Supersession]) -> bool:
    """Whether ``content`` states a fact that a later message of the task changed."""
    return any(carries(content, s.stale) for s in supersessions)


def zero_stale_entries(
    contents: Sequence[str], scores: Sequence[float], supersessions: Sequence[Supersession]
) -> list[float]:
    """The judge's score of each stored entry against the task's current facts, 0 for an entry that states a
    superseded fact (``reward.terms=current``): a stale entry misinforms whatever else it carries."""
    return [0.0 if is_stale(c, supersessions) else score for c, score in zip(contents, scores, strict=True)]


def stale_facts_fixed(
    ops: Sequence[MemoryOpRecord], supersessions: Sequence[Supersession], shown_at: Mapping[str, int]
) -> tuple[int, int]:
    """(fixed, went_stale) over the task's superseded facts, replaying the episode's successful memory operations.

    A superseded fact S *went stale* in memory when an add or update wrote an entry stating it (:func:`carries`)
    before the message changing it was shown (``shown_at[S.by]``: the first env step whose prompt held that message;
    absent: never shown, so S is not stale yet). It is *fixed* when the episode ends with no entry stating S and one
    stating the change (S.by): rewritten in place, or deleted and the change stored. So nothing done to content that
    was never true counts (junk added and deleted), nor a stale sentence stored when its change was already in view
    (a farm: store the old text, then fix it), nor a stale entry deleted and stored again, nor a fix that loses the
    change (the stale entry deleted, or rewritten to something else, and the change never stored)."""
    went_stale = {
        s
        for op in ops
        if op.ok and op.op in ("add", "update")
        for s in supersessions
        if op.step < shown_at.get(s.by, -1) and carries(op.content, s.stale)
    }
    stages = _memory_at_stages(ops)
    final = list(stages[-1][2].values()) if stages else []
    fixed = [
        s
        for s in went_stale
        if not any(carries(text, s.stale) for text in final) and any(carries(text, s.by) for text in final)
    ]
    return len(fixed), len(went_stale)


def maintenance_reward_current(fixed: int, went_stale: int) -> float:
    """R_maintenance by the task's ground truth (``reward.terms=current``): the share of the facts that went stale
    in memory that memory ends up to date on, fixed / went_stale (:func:`stale_facts_fixed`), 0 when none did.

    Eq. 24's indicator pays any Update/Delete; this pays what its Appendix B.1 example describes (an entry updated
    because the fact it holds changed) and nothing else, in any stage, a fix within Stage 1 included (the
    ``effects`` count, per stage, cannot see one: it compares what a stage began and ended with)."""
    return fixed / went_stale if went_stale else 0.0


def context_reward(compression: float, preventive: float, preservation: float) -> float:
    """R_context = Σ α_i·R_i over R_compression, R_preventive, R_preservation with α_i = 1/3 (Eq. 18)."""
    return (compression + preventive + preservation) / 3.0


def storage_reward(entry_scores: Sequence[float], threshold: float) -> float:
    """R_storage = N_high-quality / max(1, N_total) (Eq. 23) over the judge's scores of the stored entries
    (:func:`stored_entries_paper`: every Stage-1 add; :func:`stored_entries_held`: the distinct meanings held when
    Stage 1 ended); an entry is high-quality when its score against the supporting-fact sentences is >= threshold.
    0 when nothing was stored."""
    if not entry_scores:
        return 0.0
    return sum(score >= threshold for score in entry_scores) / len(entry_scores)


def maintenance_reward(maintained: int) -> float:
    """R_maintenance = 1 when at least one maintenance operation counted, else 0 (Eq. 24's indicator); what counts is
    :func:`maintenance_count_paper` (the paper's reading, :func:`maintenance_reward_paper`)."""
    return 1.0 if maintained > 0 else 0.0


def maintenance_reward_paper(maintained: int, quality_stage1: float, quality_final: float) -> float:
    """R_maintenance under Eq. 24's letter: :func:`maintenance_reward` of the count (1 when an Update/Delete
    succeeded); the memory qualities are not read."""
    return maintenance_reward(maintained)


def maintenance_reward_effective(maintained: int, quality_stage1: float, quality_final: float) -> float:
    """R_maintenance by effect: the judged quality maintenance added to the memory Stage 1 built.

        R_maintenance = max(0, Q_final − Q_stage1)   when maintained > 0 (:func:`maintenance_count_effective`), else 0

    with Q the quantity R_storage computes (:func:`storage_reward`: the share of distinct held meanings the judge
    scores >= ``reward.storage_threshold`` against the supporting facts, 0 for an empty memory), Q_stage1 over the
    memory held when Stage 1 ended (:func:`stored_entries_held`: Q_stage1 *is* R_storage) and Q_final over the same
    entries as the episode ended them (:func:`stage1_entries_at_end`: updated, deleted, never added to). So
    R_storage + R_maintenance = max(Q_stage1, Q_final) whenever maintenance counted: junk stored in Stage 1 and
    deleted (or rewritten into a copy of a stored fact) later earns exactly what never storing it earns, since the
    junk lowered Q_stage1 by what its removal gives back; a real correction — a stale or wrong entry rewritten or
    removed, raising Q — pays by how much it raised it, and a change that lowers Q (a good fact deleted) pays 0,
    never below.

    Why Q_final is not over the whole final memory: entries added in Stages 2-3 would move it too (a distractor the
    judge scores high raises it), and then any maintenance, the clean-up of one's own junk included, would unlock
    a payment for those adds, which are not maintenance (the neutral-habit property test found this: junk stored in
    Stage 1 and deleted in Stage 2 raised the total of an agent that stores the Stage-2 messages).

    How it reads Eq. 24: the paper's R_maintenance is the indicator 1[a maintenance operation happened], meant to
    reward keeping memory current (its Appendix B.1 example updates an entry when the user's preference changes).
    This keeps the indicator as the gate (a change of meaning must have happened) and replaces its value 1 by the
    improvement the judge measures: the paper's example pays exactly when the judge scores the stale entry below
    ``reward.storage_threshold`` against the supporting facts and the updated one at or above it (one entry among N
    held: +1/N), and nothing when both clear it (the stale entry already counted as high quality). The paper's
    indicator pays 1 in every case (:func:`maintenance_reward_paper`, ``reward.terms=paper``)."""
    return max(0.0, quality_final - quality_stage1) if maintained > 0 else 0.0


def relevance_reward(retrieval_scores: Sequence[float]) -> float:
    """R_relevance = mean judge score of the agent's retrievals against the question (Eq. 25); 0 without one."""
    return sum(retrieval_scores) / len(retrieval_scores) if retrieval_scores else 0.0


def memory_reward(storage: float, maintenance: float, relevance: float) -> float:
    """R_memory = Σ β_j·R_j over R_storage, R_maintenance, R_relevance with β_j = 1/3 (Eq. 22)."""
    return (storage + maintenance + relevance) / 3.0


def round_limit_hits_all(limit_hits: Sequence[dict]) -> bool:
    """Any round limit counts: a Stage-1/2 per-turn cap as well as the Stage-3 round limit."""
    return bool(limit_hits)


def round_limit_hits_stage3(limit_hits: Sequence[dict]) -> bool:
    """Only the Stage-3 round limit counts, as the authors' code penalises (a capped Stage-1/2 turn just passes)."""
    return any(hit.get("stage") == 3 for hit in limit_hits)


def penalty(
    round_limit_hit: bool,
    overflowed: bool,
    violations: int,
    *,
    round_limit_penalty: float,
    overflow_penalty: float,
    format_penalty: float,
) -> float:
    """P = p_round·[a round limit was hit] + p_overflow·[the context overflowed] + p_format·n_violations
    (Eq. 26; paper: p_round = −1, p_overflow = −0.5; the per-violation format term is ours, default 0)."""
    return round_limit_penalty * round_limit_hit + overflow_penalty * overflowed + format_penalty * violations


def composite_reward(
    r_task: float, r_context: float, r_memory: float, penalties: float, weights: tuple[float, float, float]
) -> float:
    """R = w_task·R_task + w_context·R_context + w_memory·R_memory + P (Eq. 16; weights 1/3 each, as the paper's
    Appendix C.4 gives them; its §4 gives 1.0 each, which would triple the three terms against P)."""
    w_task, w_context, w_memory = weights
    return w_task * r_task + w_context * r_context + w_memory * r_memory + penalties


def answer_only_reward(r_task: float, penalties: float) -> float:
    """R = R_task + P: the paper's answer-only ablation."""
    return r_task + penalties
