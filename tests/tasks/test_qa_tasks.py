"""Task records, the HotpotQA loader (official JSON, save_to_disk, parquet directory, hub routing) and the
synthetic task generator. Everything is local: the hub path is exercised with a stand-in for load_dataset."""

from __future__ import annotations

import json
import logging
import re

import pytest

from agemem.core.configlib import ConfigError
from agemem.core.resources import BUNDLED
from agemem.rollouts.records import Paragraph, SupportingFact, Task, load_tasks_jsonl, save_tasks
from agemem.tasks.hotpotqa import load_hotpotqa
from agemem.tasks.synthetic import ATTRIBUTES, BY_NAME, MAX_ENTITIES, generate_synthetic_tasks

SAMPLE = BUNDLED["hotpotqa"]


@pytest.fixture(scope="module")
def raw_records() -> list[dict]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def sample_tasks() -> list[Task]:
    return load_hotpotqa("bundled:hotpotqa")


def to_hf_row(record: dict) -> dict:
    """An official HotpotQA record in the Hugging Face hotpot_qa layout."""
    return {
        "id": record["_id"],
        "question": record["question"],
        "answer": record["answer"],
        "type": record["type"],
        "level": record["level"],
        "supporting_facts": {
            "title": [title for title, _ in record["supporting_facts"]],
            "sent_id": [index for _, index in record["supporting_facts"]],
        },
        "context": {
            "title": [title for title, _ in record["context"]],
            "sentences": [sentences for _, sentences in record["context"]],
        },
    }


@pytest.fixture(scope="module")
def hf_dirs(tmp_path_factory, raw_records):
    """save_to_disk DatasetDict and Dataset directories and a parquet data-file directory of records 0-3."""
    import datasets

    root = tmp_path_factory.mktemp("hf")
    validation = datasets.Dataset.from_list([to_hf_row(r) for r in raw_records[:4]])
    train = datasets.Dataset.from_list([to_hf_row(r) for r in raw_records[10:12]])
    datasets.DatasetDict({"validation": validation, "train": train}).save_to_disk(str(root / "dict"))
    validation.save_to_disk(str(root / "single"))
    (root / "parquet").mkdir()
    validation.to_parquet(str(root / "parquet" / "validation-00000-of-00001.parquet"))
    return root


# --------------------------------------------------------------------------- task records


def make_task() -> Task:
    return Task(
        id="t-1",
        question="Où est né Ångström?",
        answer="Lögdö",
        contexts=[Paragraph("Anders Ångström", ["Anders Ångström was born in Lögdö.", " He studied in Uppsala."])],
        supporting_facts=[SupportingFact("Anders Ångström", 0, "Anders Ångström was born in Lögdö.")],
        metadata={"source": "hand", "level": "easy", "nested": {"ids": [1, 2], "ok": True}, "score": 0.5},
        distractors=["Jonas Ångström was born in Stockholm."],
    )


def test_paragraph_text_is_clean_single_spaced():
    paragraph = Paragraph("x", ["First one.", " Second one.", "   ", " Third.  "])
    assert paragraph.text == "First one. Second one. Third."
    assert paragraph.sentences[1] == " Second one."  # the source sentences stay as given


def test_task_json_round_trip_is_exact_and_detached():
    task = make_task()
    data = task.to_json()
    assert Task.from_json(data) == task
    assert Task.from_json(json.loads(json.dumps(data))) == task  # survives real JSON text too
    data["metadata"]["nested"]["ids"].append(3)
    data["contexts"][0]["sentences"].append("extra")
    assert task.metadata["nested"]["ids"] == [1, 2] and len(task.contexts[0].sentences) == 2
    defaults = Task("t", "q", "a", [], [])
    assert Task.from_json(defaults.to_json()) == defaults
    with pytest.raises(ConfigError, match="lacks 'answer'"):
        Task.from_json({"id": "t", "question": "q", "contexts": [], "supporting_facts": []})


def test_save_and_load_tasks_jsonl(tmp_path, sample_tasks):
    tasks = [make_task(), *sample_tasks[:3], *generate_synthetic_tasks(2, seed=4)]
    path = save_tasks(tmp_path / "sub" / "tasks.jsonl", tasks)
    text = path.read_text(encoding="utf-8")
    assert len(text.splitlines()) == len(tasks) and "Ångström" in text  # readable, not \\u-escaped
    assert load_tasks_jsonl(path) == tasks


def test_load_tasks_jsonl_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_tasks_jsonl(tmp_path / "absent.jsonl")
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(make_task().to_json()) + "\n\n{not json\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.jsonl:3 is not JSON"):
        load_tasks_jsonl(path)


# --------------------------------------------------------------------------- HotpotQA


def test_sample_first_record_field_by_field(sample_tasks):
    task = sample_tasks[0]
    assert len(sample_tasks) == 100
    assert task.id == "5a7613c15542994ccc9186bf"
    assert task.question == "VIVA Media AG changed it's name in 2004. What does their new acronym stand for?"
    assert task.answer == "Gesellschaft mit beschränkter Haftung"
    assert task.metadata == {"source": "hotpotqa", "type": "bridge", "level": "hard", "missing_supporting_facts": []}
    assert task.distractors == []
    assert [p.title for p in task.contexts] == [
        "Constantin Medien",
        "VIVA Poland",
        "Viva (UK and Ireland)",
        "Blic",
        "Qontis",
        "VIVA Media",
        "ProSiebenSat.1 Media",
        "Gesellschaft mit beschränkter Haftung",
        "Mix Megapol",
        "John M. Keller",
    ]
    assert [len(p.sentences) for p in task.contexts] == [1, 3, 2, 2, 5, 3, 4, 5, 7, 3]
    assert task.supporting_facts == [
        SupportingFact(
            "VIVA Media",
            0,
            'VIVA Media GmbH (until 2004 "VIVA Media AG") is a music television network originating from Germany.',
        ),
        SupportingFact(
            "Gesellschaft mit beschränkter Haftung",
            0,
            "A Gesellschaft mit beschränkter Haftung (] , abbreviated GmbH ] and also GesmbH in Austria) is a type of "
            "legal entity very common in Germany, Austria, Switzerland (where it is equivalent to a S.à r.l.) and "
            "Liechtenstein.",
        ),
    ]
    viva_poland = task.contexts[1]
    assert viva_poland.sentences[1].startswith(" is a Polish")  # raw sentence keeps HotpotQA's leading space
    assert (
        viva_poland.text.startswith('VIVA Polska (earlier "VIVApolska!") is a Polish') and "  " not in viva_poland.text
    )


def test_every_sample_supporting_fact_carries_its_sentence(sample_tasks, raw_records):
    assert [t.id for t in sample_tasks] == [r["_id"] for r in raw_records]  # source order
    for task, record in zip(sample_tasks, raw_records):
        paragraphs = {p.title: p for p in task.contexts}
        assert len(task.supporting_facts) == len(record["supporting_facts"])
        for fact, (title, index) in zip(task.supporting_facts, record["supporting_facts"]):
            assert (fact.title, fact.sentence_index) == (title, index)
            assert fact.text and fact.text == paragraphs[title].sentences[index].strip()


def test_bundled_name_path_and_limit_agree(sample_tasks):
    assert load_hotpotqa(str(SAMPLE)) == sample_tasks
    assert load_hotpotqa("bundled:hotpotqa", limit=3) == sample_tasks[:3]
    assert load_hotpotqa("bundled:hotpotqa", limit=1000) == sample_tasks


def test_missing_supporting_facts_are_dropped_recorded_and_logged(tmp_path, raw_records, caplog):
    record = json.loads(json.dumps(raw_records[0]))
    record["supporting_facts"] += [["No Such Title", 0], ["VIVA Media", 99]]
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([record, raw_records[1]]), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="agemem.tasks.hotpotqa"):
        tasks = load_hotpotqa(str(path))
    assert [(f.title, f.sentence_index) for f in tasks[0].supporting_facts] == [
        ("VIVA Media", 0),
        ("Gesellschaft mit beschränkter Haftung", 0),
    ]
    assert tasks[0].metadata["missing_supporting_facts"] == [["No Such Title", 0], ["VIVA Media", 99]]
    assert tasks[1].metadata["missing_supporting_facts"] == []
    assert "dropped 2 supporting fact(s) in 1 question(s)" in caplog.text and tasks[0].id in caplog.text


def test_save_to_disk_directories_give_the_json_tasks(hf_dirs, sample_tasks):
    assert load_hotpotqa(str(hf_dirs / "dict")) == sample_tasks[:4]  # split defaults to validation
    assert load_hotpotqa(str(hf_dirs / "dict"), split="train") == sample_tasks[10:12]
    assert load_hotpotqa(str(hf_dirs / "dict"), limit=2) == sample_tasks[:2]
    assert load_hotpotqa(str(hf_dirs / "single")) == sample_tasks[:4]  # a lone Dataset is the split


def test_parquet_directory_and_file_go_through_load_dataset(hf_dirs, tmp_path, sample_tasks):
    cache = str(tmp_path / "cache")
    assert load_hotpotqa(str(hf_dirs / "parquet"), cache_dir=cache) == sample_tasks[:4]
    single_file = hf_dirs / "parquet" / "validation-00000-of-00001.parquet"
    assert load_hotpotqa(str(single_file), split="train", cache_dir=cache, limit=3) == sample_tasks[:3]
    with pytest.raises(ConfigError, match=r"Unknown split \"test\".*validation"):
        load_hotpotqa(str(hf_dirs / "parquet"), split="test", cache_dir=cache)


def test_json_lines_of_hf_rows_are_accepted(tmp_path, raw_records, sample_tasks):
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(to_hf_row(r)) for r in raw_records[:3]) + "\n", encoding="utf-8")
    assert load_hotpotqa(str(path)) == sample_tasks[:3]


def test_hub_id_routes_to_load_dataset_with_config_and_split(monkeypatch, raw_records, sample_tasks):
    import datasets

    calls = []

    def fake_load_dataset(path, name=None, *, split=None, cache_dir=None):
        calls.append((path, name, split))
        return datasets.Dataset.from_list([to_hf_row(r) for r in raw_records[:3]])

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert load_hotpotqa("hotpotqa/hotpot_qa", hub_config="fullwiki", split="train", limit=2) == sample_tasks[:2]
    assert calls == [("hotpotqa/hotpot_qa", "fullwiki", "train")]


def test_hub_failure_is_a_clear_error(monkeypatch):
    import datasets

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'hotpotqa/hotpot_qa' on the Hub (OfflineModeIsEnabled)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ConfigError, match="not a local file or directory, and loading it from the Hugging Face hub"):
        load_hotpotqa("hotpotqa/hotpot_qa")


@pytest.mark.parametrize("limit", [0, -3, True, 2.5])
def test_bad_limit(limit):
    with pytest.raises(ConfigError, match=r"limit=.* must be an integer >= 1"):
        load_hotpotqa("bundled:hotpotqa", limit=limit)


@pytest.mark.parametrize("source", ["/nonexistent/hotpot_dev.json", "data/missing.json", "./nowhere", "a/b/c"])
def test_missing_local_source(source):
    with pytest.raises(ConfigError, match=r"no such file or directory; give an official HotpotQA JSON file"):
        load_hotpotqa(source)


def test_unknown_bundled_asset():
    with pytest.raises(ConfigError, match="unknown bundled asset 'bundled:nope'; choose one of"):
        load_hotpotqa("bundled:nope")


def test_unknown_split_of_a_dataset_dict_lists_the_available_ones(hf_dirs):
    with pytest.raises(ConfigError, match=r"has no split 'test'; available: train, validation"):
        load_hotpotqa(str(hf_dirs / "dict"), split="test")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{broken", "neither JSON nor JSON Lines"),
        ('{"data": []}', "holds a JSON dict, not a list of HotpotQA records"),
        ("[1, 2]", "record 0 is a int, not a HotpotQA record"),
    ],
)
def test_file_that_is_not_hotpotqa(tmp_path, content, message):
    path = tmp_path / "odd.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        load_hotpotqa(str(path))


@pytest.mark.parametrize("key", ["_id", "question", "answer", "supporting_facts", "context"])
def test_record_missing_a_key_names_it_and_the_index(tmp_path, raw_records, key):
    broken = json.loads(json.dumps(raw_records[2]))
    del broken[key]
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([raw_records[0], raw_records[1], broken]), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"record 2 .*lacks '{key}'") as err:
        load_hotpotqa(str(path))
    if key == "answer":
        assert "test files carry no answers" in str(err.value)


def test_malformed_context_is_named(tmp_path, raw_records):
    broken = dict(raw_records[0], context="not a list")
    path = tmp_path / "hotpot.json"
    path.write_text(json.dumps([broken]), encoding="utf-8")
    with pytest.raises(ConfigError, match=r"record 0: 'context' is not a list of \[title, \.\.\.\] pairs"):
        load_hotpotqa(str(path))


# --------------------------------------------------------------------------- synthetic tasks


def test_synthetic_is_deterministic_and_seeded():
    tasks = generate_synthetic_tasks(6, seed=7)
    assert tasks == generate_synthetic_tasks(6, seed=7)
    assert generate_synthetic_tasks(3, seed=7) == tasks[:3]  # task i does not depend on num_tasks
    assert [t.id for t in tasks] == [f"synthetic-7-{i}" for i in range(6)]
    other = generate_synthetic_tasks(6, seed=8)
    assert [t.question for t in other] != [t.question for t in tasks]
    assert {t.contexts[0].title for t in other}.isdisjoint({t.contexts[0].title for t in tasks})
    assert len({t.question for t in tasks}) == 6  # tasks within a seed differ too


def test_synthetic_structure_and_metadata():
    tasks = generate_synthetic_tasks(20, seed=1, entities_per_task=4, attributes_per_entity=2, distractors_per_task=6)
    attribute_names = {a.name for a in ATTRIBUTES}
    for task in tasks:
        assert len(task.contexts) == 4 and all(len(p.sentences) == 2 for p in task.contexts)
        assert len({p.title for p in task.contexts}) == 4
        assert all(
            s.startswith(p.title + " ") or s.startswith(p.title + "'s ") for p in task.contexts for s in p.sentences
        )
        assert len(task.distractors) == 6 and len(set(task.distractors)) == 6
        assert task.metadata["source"] == "synthetic" and task.metadata["attribute"] in attribute_names
        assert task.metadata["entity"] in {p.title for p in task.contexts}
        assert task.metadata["entity"] in task.question and task.question.endswith("?")
        assert 1 <= len(task.answer.split()) <= 2
        assert Task.from_json(json.loads(json.dumps(task.to_json()))) == task


SYNTHETIC_GRID = [
    {"seed": 0},
    {"seed": 3, "entities_per_task": 1, "attributes_per_entity": 1, "distractors_per_task": 1},
    {
        "seed": 5,
        "entities_per_task": MAX_ENTITIES,
        "attributes_per_entity": len(ATTRIBUTES),
        "distractors_per_task": 20,
    },
    {"seed": 11, "entities_per_task": 5, "attributes_per_entity": 4, "distractors_per_task": 0},
]


@pytest.mark.parametrize("params", SYNTHETIC_GRID)
def test_synthetic_answer_sits_in_exactly_the_supporting_sentence(params):
    for task in generate_synthetic_tasks(60, **params):
        answer = task.answer.lower()
        assert all(answer not in d.lower() for d in task.distractors)
        assert answer not in task.question.lower()
        [fact] = task.supporting_facts
        paragraph = next(p for p in task.contexts if p.title == fact.title)
        assert fact.title == task.metadata["entity"]
        assert paragraph.sentences[fact.sentence_index] == fact.text
        holders = [s for p in task.contexts for s in p.sentences if answer in s.lower()]
        assert holders == [fact.text]


@pytest.mark.parametrize("params", SYNTHETIC_GRID)
def test_synthetic_answer_is_unambiguous(params):
    for task in generate_synthetic_tasks(60, **params):
        attribute = BY_NAME[task.metadata["attribute"]]
        entity = task.metadata["entity"]
        # any text that states this attribute for this entity ("Velora Quint plays the ") must be the supporting one
        claim = attribute.fact.split("{value}")[0].format(entity=entity)
        texts = [s for p in task.contexts for s in p.sentences] + task.distractors
        assert [t for t in texts if claim in t] == [task.supporting_facts[0].text]
        # look-alike names never contain the real name (nor the other way round), so mentions stay unambiguous
        others = [p.title for p in task.contexts if p.title != entity]
        assert all(entity not in o and o not in entity for o in others)


def test_synthetic_distractors_include_lookalikes_of_the_asked_attribute():
    tasks = generate_synthetic_tasks(30, seed=2)
    lookalike_hits = 0
    for task in tasks:
        attribute = BY_NAME[task.metadata["attribute"]]
        first, last = task.metadata["entity"].split(" ")
        suffix = attribute.fact.split("{value}")[0].split("{entity}")[1]  # e.g. " plays the "
        lookalike_hits += any(
            suffix in d and task.metadata["entity"] not in d and (first in d or last in d) for d in task.distractors
        )
    assert lookalike_hits >= 20  # most tasks carry a hard, same-attribute look-alike distractor


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_tasks": 0}, "num_tasks=0 must be >= 1"),
        ({"num_tasks": 2.0}, "num_tasks=2.0 must be an integer"),
        ({"num_tasks": True}, "num_tasks=True must be an integer"),
        ({"num_tasks": 1, "seed": "a"}, "seed='a' must be an integer"),
        ({"num_tasks": 1, "entities_per_task": 0}, "entities_per_task=0 must be >= 1"),
        ({"num_tasks": 1, "entities_per_task": MAX_ENTITIES + 1}, f"must be <= {MAX_ENTITIES}"),
        ({"num_tasks": 1, "attributes_per_entity": 0}, "attributes_per_entity=0 must be >= 1"),
        ({"num_tasks": 1, "attributes_per_entity": len(ATTRIBUTES) + 1}, f"must be <= {len(ATTRIBUTES)}"),
        ({"num_tasks": 1, "distractors_per_task": -1}, "distractors_per_task=-1 must be >= 0"),
    ],
)
def test_synthetic_parameter_validation(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        generate_synthetic_tasks(**kwargs)


REVISION_GRID = [
    {"seed": 0, "revisions": 1},
    {"seed": 4, "entities_per_task": 1, "attributes_per_entity": 1, "distractors_per_task": 1, "revisions": 1},
    {"seed": 6, "entities_per_task": 5, "attributes_per_entity": 4, "distractors_per_task": 10, "revisions": 4},
    {
        "seed": 9,
        "entities_per_task": MAX_ENTITIES,
        "attributes_per_entity": len(ATTRIBUTES),
        "distractors_per_task": 20,
        "revisions": 2,
    },
]


@pytest.mark.parametrize("params", REVISION_GRID)
def test_a_revised_task_asks_the_current_value_and_keeps_the_stale_one_earlier(params):
    for task in generate_synthetic_tasks(40, **params):
        changes = task.metadata["revisions"]
        entity, attribute = task.metadata["entity"], BY_NAME[task.metadata["attribute"]]
        assert task.metadata["type"] == "revised-fact" and len(changes) == params["revisions"]
        assert all(c["old"] != c["new"] for c in changes)
        assert len({(c["entity"], c["attribute"]) for c in changes}) == len(changes)  # each fact changes once
        (asked,) = [c for c in changes if (c["entity"], c["attribute"]) == (entity, attribute.name)]
        assert task.answer == asked["new"]
        titles = [p.title for p in task.contexts]
        # the stale statement sits in the person's paragraph, the change in its own later message
        stale, current = attribute.state(entity, asked["old"]), attribute.revise(entity, task.answer)
        assert stale in task.contexts[titles.index(entity)].sentences
        [fact] = task.supporting_facts
        assert fact.text == current and fact.title == f"{entity}'s news"
        assert titles.index(fact.title) > titles.index(entity)
        assert [p.sentences for p in task.contexts if p.title.endswith("'s news")] == [
            [BY_NAME[c["attribute"]].revise(c["entity"], c["new"])] for c in changes
        ]
        # the answer is in the change alone; no other text gives the person another value of the attribute
        answer = task.answer.lower()
        assert [s for p in task.contexts for s in p.sentences if answer in s.lower()] == [current]
        assert answer not in task.question.lower() and all(answer not in d.lower() for d in task.distractors)
        claims = (attribute.fact.split("{value}")[0].format(entity=entity), current.split(task.answer)[0])
        texts = [s for p in task.contexts for s in p.sentences] + task.distractors
        assert sorted(t for t in texts if t.startswith(claims)) == sorted([stale, current])


def test_revisions_keep_the_people_and_their_first_statements():
    plain = generate_synthetic_tasks(30, seed=12, revisions=0)
    revised = generate_synthetic_tasks(30, seed=12, revisions=2)
    same = sum(p.contexts == r.contexts[: len(p.contexts)] for p, r in zip(plain, revised))
    assert same >= 27  # only a task redrawn for want of a changeable fact differs
    assert all(t.metadata["type"] == "single-fact" and "revisions" not in t.metadata for t in plain)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"revisions": -1}, "revisions=-1 must be >= 0"),
        ({"revisions": 1.5}, "revisions=1.5 must be an integer"),
        ({"entities_per_task": 1, "attributes_per_entity": 1, "revisions": 2}, "revisions=2 must be <= 1"),
        ({"entities_per_task": MAX_ENTITIES, "attributes_per_entity": 3, "revisions": 3}, "must be <= 12"),
    ],
)
def test_revision_settings_are_checked(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        generate_synthetic_tasks(1, **kwargs)


MIXED_GRID = [params for params in REVISION_GRID if params.get("entities_per_task", 3) > 1]


@pytest.mark.parametrize("params", MIXED_GRID)
@pytest.mark.parametrize("share", [0.0, 0.3, 0.5])
def test_mixed_questions_ask_an_unchanged_fact_outside_the_share(params, share):
    tasks = generate_synthetic_tasks(80, revised_question_share=share, **params)
    kinds = [t.metadata["type"] for t in tasks]
    assert set(kinds) <= {"revised-fact", "unchanged-fact"}
    # a binomial(80, share) count of revised questions: 5 standard deviations either way
    spread = 5 * (80 * share * (1 - share)) ** 0.5
    assert abs(kinds.count("revised-fact") - 80 * share) <= spread
    for task in tasks:
        changes = task.metadata["revisions"]
        assert len(changes) == params["revisions"]  # the changes happen whatever the question asks
        entity, attribute = task.metadata["entity"], BY_NAME[task.metadata["attribute"]]
        changed = {(c["entity"], c["attribute"]) for c in changes}
        if task.metadata["type"] == "revised-fact":
            assert (entity, attribute.name) in changed
            continue
        assert (entity, attribute.name) not in changed
        # the answer is the person's first and only statement of it, in their own paragraph
        [fact] = task.supporting_facts
        assert fact.title == entity and fact.text == attribute.state(entity, task.answer)
        assert fact.text in next(p for p in task.contexts if p.title == entity).sentences
        answer = task.answer.lower()
        assert [s for p in task.contexts for s in p.sentences if answer in s.lower()] == [fact.text]
        assert answer not in task.question.lower() and all(answer not in d.lower() for d in task.distractors)
        claim = attribute.fact.split("{value}")[0].format(entity=entity)
        assert [s for p in task.contexts for s in p.sentences if claim in s] == [fact.text]


def test_a_share_of_one_is_the_task_set_from_before_the_setting():
    params = {"seed": 3, "attributes_per_entity": 2, "distractors_per_task": 2, "revisions": 1}
    assert generate_synthetic_tasks(30, revised_question_share=1.0, **params) == generate_synthetic_tasks(30, **params)
    # without revisions the share draws nothing: the same tasks whatever it is
    assert generate_synthetic_tasks(20, seed=3, revised_question_share=0.2) == generate_synthetic_tasks(20, seed=3)


@pytest.mark.parametrize("share", [-0.1, 1.5, True, "half", None])
def test_revised_question_share_is_checked(share):
    with pytest.raises(ConfigError, match=f"revised_question_share={share!r} must be a number in \\[0, 1\\]"):
        generate_synthetic_tasks(1, revisions=1, revised_question_share=share)
    with pytest.raises(ConfigError, match=re.escape("all 1 facts change (revisions=1): state more facts")):
        generate_synthetic_tasks(
            1, entities_per_task=1, attributes_per_entity=1, revisions=1, revised_question_share=0.5
        )


@pytest.mark.parametrize("params", MIXED_GRID)
@pytest.mark.parametrize("share", [1.0, 0.5])
def test_a_restated_change_carries_the_persons_other_facts_as_they_stand(params, share):
    tasks = generate_synthetic_tasks(60, revised_question_share=share, restate_unchanged=True, **params)
    for task in tasks:
        # each person's statements as they stand, brought forward message by message
        standing = {p.title: list(p.sentences) for p in task.contexts if not p.title.endswith("'s news")}
        news = [p for p in task.contexts if p.title.endswith("'s news")]
        assert len(news) == len(task.metadata["revisions"])
        for change, paragraph in zip(task.metadata["revisions"], news):
            attribute, entity = BY_NAME[change["attribute"]], change["entity"]
            stale, kept = attribute.state(entity, change["old"]), attribute.state(entity, change["new"])
            assert paragraph.title == f"{entity}'s news" and stale in standing[entity]
            # the change, then every other statement of the person as it stands, in the person's order
            expected = [attribute.revise(entity, change["new"])] + [s for s in standing[entity] if s != stale]
            assert paragraph.sentences == expected
            standing[entity] = [kept if s == stale else s for s in standing[entity]]
        # the answer still sits in one sentence, repeated word for word by a restatement at most
        [fact] = task.supporting_facts
        answer = task.answer.lower()
        assert {s for p in task.contexts for s in p.sentences if answer in s.lower()} == {fact.text}
        assert answer not in task.question.lower() and all(answer not in d.lower() for d in task.distractors)
        if task.metadata["type"] == "unchanged-fact" and task.metadata["entity"] in {
            c["entity"] for c in task.metadata["revisions"]
        }:
            assert any(fact.text in p.sentences for p in news)  # the changed person's other fact: restated


def test_restating_is_off_by_default_and_needs_a_revision():
    params = {"seed": 3, "attributes_per_entity": 2, "distractors_per_task": 2, "revisions": 1}
    plain = generate_synthetic_tasks(30, **params)
    assert generate_synthetic_tasks(30, restate_unchanged=False, **params) == plain
    restated = generate_synthetic_tasks(30, restate_unchanged=True, **params)
    # the same draws: only the change messages grow (every question here asks the change, held by one sentence)
    assert [t.contexts[:-1] for t in restated] == [t.contexts[:-1] for t in plain]
    assert all(r.contexts[-1].sentences[0] == p.contexts[-1].sentences[0] for r, p in zip(restated, plain))
    assert all(len(r.contexts[-1].sentences) == 2 for r in restated)
    with pytest.raises(ConfigError, match="revisions=0 changes nothing: set revisions >= 1"):
        generate_synthetic_tasks(1, restate_unchanged=True)
    with pytest.raises(ConfigError, match="restate_unchanged='yes' must be true or false"):
        generate_synthetic_tasks(1, revisions=1, restate_unchanged="yes")


@pytest.mark.parametrize(("sentences", "params"), [(3, {"seed": 1}), (6, {"seed": 8, "distractors_per_task": 12})])
def test_long_distractors_hold_that_many_lookalike_sentences_and_never_the_answer(sentences, params):
    plain = generate_synthetic_tasks(30, **params)
    long = generate_synthetic_tasks(30, distractor_sentences=sentences, **params)
    for short, task in zip(plain, long):
        assert len(task.distractors) == params.get("distractors_per_task", 5)
        for text in task.distractors:
            assert text.count(".") == sentences  # one full stop per sentence (names and values carry none)
            assert task.answer.lower() not in text.lower()
        # the same people, facts and question: only Stage 2 is longer
        assert (task.contexts, task.question, task.answer) == (short.contexts, short.question, short.answer)


def test_distractor_sentences_is_checked():
    with pytest.raises(ConfigError, match="distractor_sentences=0 must be >= 1"):
        generate_synthetic_tasks(1, distractor_sentences=0)
