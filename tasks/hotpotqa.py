"""HotpotQA as an environment: its loader, the three-stage episode (paragraphs, distractors, question) and the
judge's composite reward.

``data.source`` is ``hotpotqa`` (the bundled sample), or anything :func:`load_hotpotqa` reads: ``bundled:hotpotqa``,
a JSON file, a ``datasets`` directory, a hub id such as ``hotpotqa/hotpot_qa``.

Loading HotpotQA questions as :class:`~agemem.rollouts.records.Task` records. Sources, tried in this order:

* ``"bundled:hotpotqa"`` (or any ``bundled:`` name): the 100-question dev sample shipped in the package;
* a file: the official HotpotQA JSON (a list of records with ``_id, question, answer, type, level,
  supporting_facts [[title, idx]], context [[title, [sentences]]]``), JSON Lines of the same or of
  Hugging Face-format records, or a parquet / arrow file;
* a directory written by ``datasets`` ``save_to_disk`` (a ``Dataset``, or a ``DatasetDict`` from which
  ``split`` is taken);
* any other local directory of data files, through ``datasets.load_dataset(dir, split=split)``;
* a hub id such as ``hotpotqa/hotpot_qa``, through ``datasets.load_dataset(id, hub_config, split=split)``.

Both record layouts are accepted everywhere: the official one and the Hugging Face one (``id``,
``supporting_facts {title: [...], sent_id: [...]}``, ``context {title: [...], sentences: [[...]]}``).

Supporting facts that point outside their record's context (a title that is not among the
paragraphs, or a sentence index past the paragraph's end; real HotpotQA has a few) are dropped:
the agent never sees such a sentence in Stage 1, so it cannot be asked to store it, and an empty
text would let a storage judge match anything. Each drop is kept in
``metadata["missing_supporting_facts"]`` as ``[title, index]`` and summarised in one logged warning.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.core.resources import resolve
from agemem.core.text import normalize_answer
from agemem.rollouts.records import Paragraph, SupportingFact, Task
from agemem.tasks.base import Evaluation, Option, load_tasks, register_task
from agemem.tasks.qa import QATask
from agemem.tasks.stream import StreamItem, StreamSpec, qa_execution

if TYPE_CHECKING:
    from agemem.tasks.config import TaskRunConfig

logger = logging.getLogger(__name__)

SOURCES_HINT = (
    "give an official HotpotQA JSON file, a directory written by datasets' save_to_disk, a directory of "
    "parquet/json data files, a hub id such as 'hotpotqa/hotpot_qa', or 'bundled:hotpotqa'"
)
REQUIRED_KEYS = ("question", "answer", "supporting_facts", "context")
# owner/name or name, as on the Hugging Face hub; anything else that does not exist is a missing local path
HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?$")
DATA_SUFFIXES = (".json", ".jsonl", ".parquet", ".arrow", ".csv")


def load_hotpotqa(
    source: str,
    *,
    split: str = "validation",
    hub_config: str = "distractor",
    limit: int | None = None,
    cache_dir: str | None = None,
) -> list[Task]:
    """Load HotpotQA as tasks, in the source's order; ``limit`` keeps the first N.

    ``split`` selects the split of a ``DatasetDict``, a data-file directory or a hub dataset (an
    official JSON file is one split already). ``hub_config`` (``distractor`` or ``fullwiki``) is
    used for hub ids only. ``cache_dir`` is where ``datasets`` keeps its Arrow cache (its default
    when None). Errors are :class:`~agemem.core.configlib.ConfigError` and name the problem and the fix.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigError(f"limit={limit!r} must be an integer >= 1, or None for all questions")
    resolved = resolve(source)
    path = Path(resolved).expanduser()
    if path.is_file():
        if path.suffix in (".parquet", ".arrow"):
            records = _records_from_data_file(path, split, limit, cache_dir)
        else:
            records = _records_from_json_file(path, limit)
    elif path.is_dir():
        records = _records_from_directory(path, split, limit, cache_dir)
    elif _looks_like_local_path(resolved):
        raise ConfigError(f"HotpotQA source {source!r}: no such file or directory; {SOURCES_HINT}")
    else:
        records = _records_from_hub(resolved, hub_config, split, limit, cache_dir)

    tasks = [_record_to_task(record, index, source) for index, record in enumerate(records)]
    dropped = [task for task in tasks if task.metadata["missing_supporting_facts"]]
    if dropped:
        count = sum(len(task.metadata["missing_supporting_facts"]) for task in dropped)
        logger.warning(
            "%s: dropped %d supporting fact(s) in %d question(s) that point outside their context "
            "(first: %s); see metadata['missing_supporting_facts']",
            source,
            count,
            len(dropped),
            dropped[0].id,
        )
    return tasks


def _looks_like_local_path(name: str) -> bool:
    return (
        name.startswith(("/", ".", "~"))
        or name.lower().endswith(DATA_SUFFIXES)
        or "\\" in name
        or not HUB_ID.match(name)
    )


def _records_from_json_file(path: Path, limit: int | None) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"{path} is not UTF-8 text ({err}); {SOURCES_HINT}") from err
    try:
        records = json.loads(text)
    except json.JSONDecodeError as err:
        # `Dataset.to_json` and many exports write JSON Lines: one record per line
        try:
            records = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            raise ConfigError(f"{path} is neither JSON nor JSON Lines ({err}); {SOURCES_HINT}") from err
    if isinstance(records, dict) and all(key in records for key in REQUIRED_KEYS):
        records = [records]
    if not isinstance(records, list):
        raise ConfigError(
            f"{path} holds a JSON {type(records).__name__}, not a list of HotpotQA records; "
            "the official files are one JSON list of questions"
        )
    return records[:limit] if limit is not None else records


def _records_from_data_file(path: Path, split: str, limit: int | None, cache_dir: str | None) -> list[Any]:
    import datasets  # lazy: heavy, and only needed for these sources

    builder = {".parquet": "parquet", ".arrow": "arrow"}[path.suffix]
    # name the single file's split after the one asked for, so that `split` never gets in the way
    dataset = datasets.load_dataset(builder, data_files={split: str(path)}, split=split, cache_dir=cache_dir)
    return _dataset_rows(dataset, limit)


def _records_from_directory(path: Path, split: str, limit: int | None, cache_dir: str | None) -> list[Any]:
    import datasets

    if (path / "dataset_dict.json").is_file() or (path / "state.json").is_file():
        loaded = datasets.load_from_disk(str(path))
        if isinstance(loaded, datasets.DatasetDict):
            if split not in loaded:
                raise ConfigError(
                    f"{path} has no split {split!r}; available: {', '.join(sorted(loaded))} (set split=...)"
                )
            loaded = loaded[split]
        return _dataset_rows(loaded, limit)
    try:
        dataset = datasets.load_dataset(str(path), split=split, cache_dir=cache_dir)
    except ValueError as err:
        if "split" in str(err).lower():
            raise ConfigError(f"{path}: {err} (set split=...)") from err
        raise ConfigError(f"{path} could not be read as a dataset ({err}); {SOURCES_HINT}") from err
    except FileNotFoundError as err:
        raise ConfigError(f"{path} holds no data files datasets can read ({err}); {SOURCES_HINT}") from err
    return _dataset_rows(dataset, limit)


def _records_from_hub(name: str, hub_config: str, split: str, limit: int | None, cache_dir: str | None) -> list[Any]:
    import datasets

    try:
        dataset = datasets.load_dataset(name, hub_config, split=split, cache_dir=cache_dir)
    except ValueError as err:
        if "split" in str(err).lower():
            raise ConfigError(f"hub dataset {name!r} ({hub_config}): {err} (set split=...)") from err
        raise ConfigError(f"hub dataset {name!r} with config {hub_config!r} could not be loaded: {err}") from err
    except Exception as err:
        raise ConfigError(
            f"{name!r} is not a local file or directory, and loading it from the Hugging Face hub failed "
            f"({type(err).__name__}: {err}); check the id and config {hub_config!r} (distractor or fullwiki) "
            f"and the network (HF_HUB_OFFLINE=1 allows cached datasets only), or {SOURCES_HINT}"
        ) from err
    return _dataset_rows(dataset, limit)


def _dataset_rows(dataset: Any, limit: int | None) -> list[dict[str, Any]]:
    if limit is not None and limit < len(dataset):
        dataset = dataset.select(range(limit))
    return dataset.to_list()


def _record_to_task(record: Any, index: int, source: str) -> Task:
    where = f"{source}: record {index}"
    if not isinstance(record, dict):
        raise ConfigError(f"{where} is a {type(record).__name__}, not a HotpotQA record (a JSON object)")
    task_id = record.get("_id", record.get("id"))
    if task_id is None:
        raise ConfigError(f"{where} lacks '_id' (or 'id'); {_layout_hint()}")
    for key in REQUIRED_KEYS:
        if key not in record:
            extra = "; HotpotQA test files carry no answers, use a dev or train file" if key == "answer" else ""
            raise ConfigError(f"{where} ({task_id}) lacks {key!r}{extra}; {_layout_hint()}")

    contexts = [Paragraph(title, list(sentences)) for title, sentences in _pairs(record, "context", "sentences", where)]
    by_title: dict[str, Paragraph] = {}
    for paragraph in contexts:
        by_title.setdefault(paragraph.title, paragraph)  # a repeated title: its first paragraph wins

    supporting, missing = [], []
    for title, sentence_index in _pairs(record, "supporting_facts", "sent_id", where):
        paragraph = by_title.get(title)
        if (
            paragraph is None
            or not isinstance(sentence_index, int)
            or not 0 <= sentence_index < len(paragraph.sentences)
        ):
            missing.append([title, sentence_index])
            continue
        supporting.append(SupportingFact(title, sentence_index, paragraph.sentences[sentence_index].strip()))

    metadata: dict[str, Any] = {"source": "hotpotqa"}
    for key in ("type", "level"):
        if key in record:
            metadata[key] = record[key]
    metadata["missing_supporting_facts"] = missing
    return Task(
        id=str(task_id),
        question=record["question"],
        answer=record["answer"],
        contexts=contexts,
        supporting_facts=supporting,
        metadata=metadata,
    )


def _pairs(record: dict[str, Any], key: str, second: str, where: str) -> list[tuple[Any, Any]]:
    """``[[title, x], ...]`` (official layout) or ``{title: [...], second: [...]}`` (Hugging Face layout) as pairs."""
    value = record[key]
    if isinstance(value, dict):
        if "title" not in value or second not in value:
            raise ConfigError(f"{where}: {key!r} must have 'title' and {second!r} lists; {_layout_hint()}")
        if len(value["title"]) != len(value[second]):
            raise ConfigError(f"{where}: {key!r} has {len(value['title'])} titles but {len(value[second])} {second}")
        return list(zip(value["title"], value[second]))
    if isinstance(value, list) and all(isinstance(pair, (list, tuple)) and len(pair) == 2 for pair in value):
        return [(title, x) for title, x in value]
    raise ConfigError(f"{where}: {key!r} is not a list of [title, ...] pairs; {_layout_hint()}")


def _layout_hint() -> str:
    return (
        "expected HotpotQA records with _id, question, answer, supporting_facts [[title, idx]] and "
        "context [[title, [sentences]]] (official JSON), or the Hugging Face hotpot_qa fields"
    )


BUNDLED = "bundled:hotpotqa"
"""what ``data.source=hotpotqa`` loads: the sample shipped with agemem."""


def is_hotpotqa_source(source: str) -> bool:
    """``bundled:hotpotqa``, or a file, folder or hub id whose name says hotpot (``/data/hotpot_dev.json``,
    ``hotpotqa/hotpot_qa``). Any other location is written ``hotpotqa:<location>``: a bare path is not claimed, so
    another environment's file is never read as HotpotQA."""
    return source == BUNDLED or "hotpot" in source.lower()


def hotpotqa_location(source: str) -> str:
    """What :func:`load_hotpotqa` reads for ``data.source``: the bundled sample for ``hotpotqa``, the location of
    ``hotpotqa:<location>``, else the source itself."""
    return BUNDLED if source == "hotpotqa" else source.removeprefix("hotpotqa:")


def load_hotpotqa_tasks(config: TaskRunConfig) -> list[Task]:
    data = config.data
    return load_hotpotqa(hotpotqa_location(data.source), split=data.split, hub_config=data.hub_config)


def hotpotqa_item(task: Task, show_context: bool) -> StreamItem:
    """One HotpotQA question as a stream item: the question (with its paragraphs when ``show_context``: the
    distractor setting) and, as ground truth, the supporting facts and the gold answer."""
    prompt = f"Question: {task.question}"
    if show_context:
        paragraphs = "\n".join(f"- {p.title}: {p.text}" for p in task.contexts if p.text)
        prompt += f"\n\nParagraphs:\n{paragraphs}\n\nAnswer the question from the paragraphs."
    facts = " ".join(f.text for f in task.supporting_facts if f.text)
    return StreamItem(
        id=task.id,
        query=task.question,
        prompt=prompt,
        answer=task.answer,
        task_key=normalize_answer(task.question),
        ground_truth=qa_execution(facts, task.answer),
        metadata={"type": task.metadata.get("type"), "level": task.metadata.get("level")},
    )


def stream_items(config: Any) -> list[StreamItem]:
    """`agemem eval stream --task hotpotqa`: the questions of ``data.source`` (``data.limit`` applies first)."""
    return [hotpotqa_item(task, config.stream.show_context) for task in load_tasks(config)]


EVALUATION = Evaluation(
    "HotpotQA as three-stage memory episodes: J, EM, F1, MQ, TN, TC (table, JSON, plot)",
    "data.limit",
    (Option("--data", "data.source", "HotpotQA JSON file, datasets directory or hub id (data.source)", None, "PATH"),),
    title="HotpotQA",
)
"""`agemem eval hotpotqa`."""

HOTPOTQA = register_task(
    QATask(
        "hotpotqa",
        load_hotpotqa_tasks,
        is_hotpotqa_source,
        evaluation=EVALUATION,
        stream=StreamSpec("qa", stream_items),
    )
)
