"""LoCoMo (Maharana et al., ACL 2024) as an environment: its loader, and its questions as training tasks.

LoCoMo is where the memory systems publish (Mem0, Zep, A-Mem, LangMem, Memory-R1): ten very long conversations
between two people, 19 to 32 dated sessions each (272 in all, 5,882 turns, about 590 a conversation), and 1,986
annotated questions about them. Each question has a ``category`` and ``evidence``, the ids of the turns that
answer it (``D3:12``: session 3, turn 12). Category 5 is adversarial: a question about something that was never
said, whose right answer is that it was not mentioned; the data give its tempting wrong answer
(``adversarial_answer``). Which of categories 1 to 4 is multi-hop, temporal, open-domain or single-hop differs
between papers; :mod:`agemem.eval.locomo_metrics` says which convention each metric follows.

**Licence.** LoCoMo is CC BY-NC 4.0: the package never ships it. ``locomo.data`` (or ``data.source=locomo:PATH``)
names a copy of the authors' ``data/locomo10.json`` (repository snap-research/LoCoMo).

**What an episode is.** A question is one three-stage episode (:class:`LocomoTask`): Stage 1 is the whole
conversation, one user message per session, headed by the session's date; there is no Stage 2 (the sessions
themselves are mostly talk no question asks about); Stage 3 is the question. So ``agemem train
data.source=locomo`` trains a memory policy on long conversations: it must decide what of hundreds of turns to
store, and the context budget decides what of the rest survives. Each question replays its whole conversation
(a training episode is one question); the evaluation (``agemem eval locomo``) instead reads each conversation
once and asks all its questions against the memory it built.

Turns that shared a photo carry BLIP's caption of it (``blip_caption``); with ``locomo.image_captions`` (default)
the turn says ``[shares a photo: <caption>]``, as the memory systems' evaluations give it. Evidence ids that are
malformed in the data (``D:11:26``, ``D30:05``, several ids in one string) are read leniently; the 2 of 2,815 that
name no turn are dropped and listed in the task's ``metadata["missing_evidence"]``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from agemem.core.configlib import ConfigError
from agemem.rollouts.episode import Stages
from agemem.rollouts.records import Paragraph, SupportingFact, Task
from agemem.tasks.base import Evaluation, Option, register_task
from agemem.tasks.qa import QATask

if TYPE_CHECKING:
    from agemem.rollouts.config import RolloutConfig
    from agemem.tasks.config import TaskRunConfig

CATEGORIES: tuple[int, ...] = (1, 2, 3, 4, 5)
"""LoCoMo's question categories; 5 is adversarial (never answerable from the conversation)."""
ADVERSARIAL = 5
NOT_MENTIONED = "Not mentioned in the conversation"
"""the gold answer of an adversarial question: LoCoMo's own scoring counts an answer right when it says the
conversation has no such information."""
DATA_HINT = (
    "set locomo.data (or data.source=locomo:PATH) to a copy of LoCoMo's data/locomo10.json (repository "
    "snap-research/LoCoMo; CC BY-NC 4.0, so agemem does not ship it)"
)


@dataclass
class LocomoConfig:
    """LoCoMo conversations and questions (data.source=locomo; the file is never shipped: CC BY-NC 4.0)."""

    data: str = ""
    """path of LoCoMo's locomo10.json (the authors' data/locomo10.json); data.source=locomo:PATH sets it too."""
    categories: list[int] = field(default_factory=lambda: [1, 2, 3, 4])
    """question categories to play; 5 (adversarial) is left out by default, as the memory systems' papers do."""
    conversations: list[str] = field(default_factory=list)
    """sample ids of the conversations to play (conv-26, ...); empty = all ten, in the file's order."""
    image_captions: bool = True
    """a turn that shared a photo says so with BLIP's caption ([shares a photo: ...]), as the papers give it."""
    sessions: int = 0
    """play only each conversation's first N sessions, and only the questions all of whose evidence lies in them
    (quick checks, CPU tests); 0 = every session and question."""
    session_context: Literal["carry", "reset"] = "carry"
    """agemem eval locomo: carry = the short-term context runs on from session to session, its oldest rounds
    dropped when a session would not fit env.context.max_context_tokens (the agent's summaries and stores decide
    what survives); reset = each session starts from an empty context (only long-term memory carries over)."""

    def validate(self) -> None:
        if self.sessions < 0:
            raise ConfigError(f"locomo.sessions={self.sessions} must be >= 0 (0 = every session)")
        unknown = sorted(set(self.categories) - set(CATEGORIES))
        if unknown or not self.categories:
            raise ConfigError(
                f"locomo.categories={self.categories} must name some of {list(CATEGORIES)} (5 is adversarial)"
            )


# --------------------------------------------------------------------------------------------- the records


@dataclass(frozen=True)
class LocomoTurn:
    dia_id: str
    """the turn's id in the data (``D3:12``: session 3, turn 12)."""
    speaker: str
    text: str
    image_caption: str = ""
    """BLIP's caption of the photo the turn shared (empty: none)."""

    def line(self, image_captions: bool = True) -> str:
        """``Speaker: text``, with ``[shares a photo: caption]`` when the turn shared one."""
        photo = f" [shares a photo: {self.image_caption}]" if image_captions and self.image_caption else ""
        return f"{self.speaker}: {self.text}{photo}"


@dataclass(frozen=True)
class LocomoSession:
    index: int
    """the session's number (1-based, as in ``session_N``)."""
    date_time: str
    """when it took place, as the data say it (``1:56 pm on 8 May, 2023``)."""
    turns: tuple[LocomoTurn, ...]

    @property
    def header(self) -> str:
        return f"Session {self.index} ({self.date_time})"

    def message(self, image_captions: bool = True) -> str:
        """The session as one user message: its header, then a line per turn."""
        return session_text(self.header, [turn.line(image_captions) for turn in self.turns])


def session_text(header: str, lines: list[str]) -> str:
    """One session as the user message an agent is shown: ``[Session 3 (1:56 pm on 8 May, 2023)]``, then a line per
    turn (``Speaker: text``)."""
    return "\n".join([f"[{header}]", *lines])


@dataclass(frozen=True)
class LocomoQuestion:
    question: str
    answer: str
    """the gold answer as text (a few are numbers in the data); for category 5, :data:`NOT_MENTIONED`."""
    category: int
    evidence: tuple[str, ...]
    """the ids of the turns that answer it, as the data give them (possibly malformed: :func:`evidence_ids`)."""
    adversarial_answer: str = ""
    """category 5: the tempting wrong answer the data give."""


@dataclass(frozen=True)
class LocomoConversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: tuple[LocomoSession, ...]
    questions: tuple[LocomoQuestion, ...]

    def turn_ids(self) -> dict[str, tuple[int, int]]:
        """``{dia_id: (session position, turn position)}`` over every turn."""
        return {
            turn.dia_id: (position, index)
            for position, session in enumerate(self.sessions)
            for index, turn in enumerate(session.turns)
        }


# --------------------------------------------------------------------------------------------- loading


def load_locomo(path: str | Path) -> list[LocomoConversation]:
    """The conversations of a LoCoMo file (the authors' ``locomo10.json`` layout), in the file's order. Errors are
    :class:`~agemem.core.configlib.ConfigError`s that name the problem and the fix."""
    if not str(path):
        raise ConfigError(f"no LoCoMo file given: {DATA_HINT}")
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"LoCoMo file {file} does not exist: {DATA_HINT}")
    try:
        records = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ConfigError(f"{file} is not LoCoMo's JSON ({err}): {DATA_HINT}") from err
    if not isinstance(records, list) or not records:
        raise ConfigError(f"{file} holds no list of conversations: {DATA_HINT}")
    return [_conversation(record, f"{file}[{index}]") for index, record in enumerate(records)]


def _conversation(record: Any, where: str) -> LocomoConversation:
    if not isinstance(record, dict) or not {"sample_id", "conversation", "qa"} <= set(record):
        raise ConfigError(f"{where} lacks sample_id, conversation or qa: {DATA_HINT}")
    talk = record["conversation"]
    speakers = (str(talk.get("speaker_a", "")), str(talk.get("speaker_b", "")))
    numbers = sorted(int(key.split("_")[1]) for key in talk if re.fullmatch(r"session_\d+", key))
    sessions = []
    for number in numbers:  # dates without a session (the data list some) are no session
        turns = tuple(_turn(turn, f"{where}.session_{number}") for turn in talk[f"session_{number}"])
        sessions.append(LocomoSession(number, str(talk.get(f"session_{number}_date_time", "")), turns))
    questions = tuple(_question(qa, f"{where}.qa[{index}]") for index, qa in enumerate(record["qa"]))
    return LocomoConversation(str(record["sample_id"]), speakers, tuple(sessions), questions)


def _turn(turn: Any, where: str) -> LocomoTurn:
    if not isinstance(turn, dict) or not {"speaker", "dia_id", "text"} <= set(turn):
        raise ConfigError(f"{where}: a turn lacks speaker, dia_id or text: {DATA_HINT}")
    return LocomoTurn(str(turn["dia_id"]), str(turn["speaker"]), str(turn["text"]), str(turn.get("blip_caption", "")))


def _question(qa: Any, where: str) -> LocomoQuestion:
    if not isinstance(qa, dict) or "question" not in qa or qa.get("category") not in CATEGORIES:
        raise ConfigError(f"{where}: a question lacks its text or a category in {list(CATEGORIES)}: {DATA_HINT}")
    category = int(qa["category"])
    if category == ADVERSARIAL:
        answer = NOT_MENTIONED
    elif qa.get("answer") is None:
        raise ConfigError(f"{where}: a category-{category} question has no answer: {DATA_HINT}")
    else:
        answer = str(qa["answer"])
    evidence = tuple(str(item) for item in qa.get("evidence", []))
    return LocomoQuestion(str(qa["question"]), answer, category, evidence, str(qa.get("adversarial_answer") or ""))


def evidence_ids(evidence: tuple[str, ...]) -> list[str]:
    """The turn ids a question's evidence names, read leniently: several ids in one string (``D8:6; D9:17``,
    ``D9:1 D4:4``), a stray colon (``D:11:26``) and leading zeros (``D30:05``) as the data have them."""
    found = []
    for item in evidence:
        for match in re.finditer(r"D:?(\d+):0*(\d+)", item):
            found.append(f"D{int(match.group(1))}:{int(match.group(2))}")
    return found


# --------------------------------------------------------------------------------------------- as tasks


def played_sessions(conversation: LocomoConversation, settings: LocomoConfig) -> tuple[LocomoSession, ...]:
    """The sessions played: all, or the first ``settings.sessions`` (``locomo.sessions``)."""
    return conversation.sessions[: settings.sessions] if settings.sessions else conversation.sessions


def question_tasks(conversation: LocomoConversation, settings: LocomoConfig) -> list[Task]:
    """The conversation's questions of ``settings.categories`` as tasks: the sessions as Stage-1 paragraphs (one a
    session, a sentence a turn), the question, its gold answer, and its evidence turns as the supporting facts.
    With ``settings.sessions`` = N, only the first N sessions, and only the questions whose evidence all lies in
    them."""
    played = played_sessions(conversation, settings)
    paragraphs = [
        Paragraph(session.header, [turn.line(settings.image_captions) for turn in session.turns]) for session in played
    ]
    where = conversation.turn_ids()
    tasks = []
    for index, question in enumerate(conversation.questions):
        if question.category not in settings.categories:
            continue
        facts, missing = [], []
        named = evidence_ids(question.evidence)
        for dia_id in named:
            if dia_id not in where:
                missing.append(dia_id)
                continue
            position, turn = where[dia_id]
            if position >= len(played):
                break
            paragraph = paragraphs[position]
            facts.append(SupportingFact(paragraph.title, turn, paragraph.sentences[turn]))
        if settings.sessions and (not facts or len(facts) + len(missing) < len(named)):
            continue  # asks about a session not played
        metadata = {
            "source": "locomo",
            "conversation": conversation.sample_id,
            "question_index": index,
            "category": question.category,
            "evidence": list(question.evidence),
            "missing_evidence": missing,
            "adversarial_answer": question.adversarial_answer,
            "sessions": len(played),
        }
        task_id = f"{conversation.sample_id}/q{index}"
        tasks.append(Task(task_id, question.question, question.answer, paragraphs, facts, metadata))
    return tasks


def locomo_settings(config: TaskRunConfig) -> LocomoConfig:
    settings = getattr(config, "locomo", None)
    return settings if isinstance(settings, LocomoConfig) else LocomoConfig()


def locomo_path(config: TaskRunConfig) -> str:
    """The file ``data.source`` names (``locomo:PATH``), else ``locomo.data``."""
    source = config.data.source
    return source.removeprefix("locomo:") if source.startswith("locomo:") else locomo_settings(config).data


def selected_conversations(config: TaskRunConfig) -> list[LocomoConversation]:
    """The file's conversations, only those of ``locomo.conversations`` when it names some (an unknown id is an
    error that lists the known ones)."""
    settings = locomo_settings(config)
    conversations = load_locomo(locomo_path(config))
    if not settings.conversations:
        return conversations
    known = {conversation.sample_id: conversation for conversation in conversations}
    unknown = [sample for sample in settings.conversations if sample not in known]
    if unknown:
        raise ConfigError(f"locomo.conversations names {unknown}, not in the file; it holds {sorted(known)}")
    return [known[sample] for sample in settings.conversations]


def load_locomo_tasks(config: TaskRunConfig) -> list[Task]:
    """Every question of the selected conversations and categories, conversation by conversation."""
    settings = locomo_settings(config)
    return [task for conversation in selected_conversations(config) for task in question_tasks(conversation, settings)]


@dataclass(frozen=True)
class LocomoTask(QATask):
    """A LoCoMo question as a three-stage episode: Stage 1 the conversation, a message per session headed by its
    date; no Stage 2; Stage 3 the question. Scored as every QA task (the judge and the composite reward)."""

    def stages(self, task: Task, distractors: list[str], rollout: RolloutConfig) -> Stages:
        sessions = [session_text(p.title, p.sentences) for p in task.contexts] if rollout.stage1 else []
        return Stages(sessions, [], task.question)


EVALUATION = Evaluation(
    "LoCoMo's long conversations, ingested session by session, then their questions: F1, BLEU-1, J by category",
    "data.limit",
    (
        Option("--data", "locomo.data", "LoCoMo's locomo10.json (not shipped: CC BY-NC 4.0)", None, "PATH"),
        Option(
            "--conversations",
            "locomo.conversations",
            "sample ids to play, comma-separated (conv-26,conv-30; default: all ten)",
            None,
            "IDS",
            listed=True,
        ),
    ),
    title="LoCoMo",
    harness="agemem.eval.locomo:locomo_benchmark",
)
"""`agemem eval locomo` (:mod:`agemem.eval.locomo`)."""

LOCOMO = register_task(
    LocomoTask(
        "locomo",
        load_locomo_tasks,
        lambda source: source.startswith("locomo:"),
        uses_distractors=False,
        evaluation=EVALUATION,
        settings=LocomoConfig,
    )
)
