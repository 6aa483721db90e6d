"""Synthetic recall tasks as an environment (``data.source=synthetic``, settings ``data.synthetic.*``): invented
people's facts in Stage 1, the task's own or drawn distractors in Stage 2, a question about one fact in Stage 3;
the three-stage episode and the judge's composite reward, as HotpotQA (:class:`agemem.tasks.qa.QATask`).

The generator: A seeded generator of small synthetic memory tasks (cheap enough to show learning on a CPU).

Each task is about a handful of invented people. Stage 1 states their attributes in plain
sentences, one paragraph per person ("Velora Quint plays the cello."). Stage 3 asks for one
attribute of one person, so exactly one stored sentence answers it. The built-in Stage-2
distractors look related but never help and never contain the answer:

* ``lookalike``: a person with a similar name (one letter of the last name changed, or the same
  first or last name) with the *asked* attribute and another value, "Velora Quinn plays the harp.";
* ``lookalike-other``: a look-alike of any task person, with any attribute;
* ``new-attribute``: a task person with an attribute that Stage 1 never states for them (so it
  cannot contradict a stored fact), "Velora Quint has a pet ferret."

Invariants, checked on every task before it is returned (a candidate failing one is redrawn):
the answer string (case-insensitively) occurs in the supporting sentence and in no other
context sentence, distractor, or the question; no text gives the asked person another value of
the asked attribute; names never contain one another, so a look-alike is never mistaken for the
real person by substring search.

Task ``i`` of seed ``s`` comes from its own random stream (``synthetic/{s}/{i}``), so it is the
same whatever ``num_tasks`` is, and ids ``synthetic-{s}-{i}`` are stable.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from agemem.core.configlib import ConfigError
from agemem.rewards.composite import CURRENT_FACTS_KEY, SUPERSEDED_FACTS_KEY
from agemem.rollouts.records import Paragraph, SupportingFact, Task
from agemem.tasks.base import Evaluation, register_task
from agemem.tasks.qa import QATask
from agemem.tasks.stream import StreamItem, StreamSpec, qa_execution

if TYPE_CHECKING:
    from agemem.tasks.config import TaskRunConfig


@dataclass(frozen=True)
class Attribute:
    name: str
    """key recorded in ``metadata["attribute"]``."""
    fact: str
    """statement template with ``{entity}`` and ``{value}``."""
    question: str
    """question template with ``{entity}``."""
    values: tuple[str, ...]
    """possible answers, each one or two words, none a substring of another in the same attribute."""
    revision: str | None = None
    """statement of a changed value ("{entity} has moved to {value}."); None: the attribute never changes."""

    def state(self, entity: str, value: str) -> str:
        return self.fact.format(entity=entity, value=value)

    def revise(self, entity: str, value: str) -> str:
        if self.revision is None:
            raise ValueError(f"attribute {self.name!r} never changes")
        return self.revision.format(entity=entity, value=value)

    def ask(self, entity: str) -> str:
        return self.question.format(entity=entity)


def _values(text: str) -> tuple[str, ...]:
    return tuple(value.strip() for value in text.split(","))


ATTRIBUTES: tuple[Attribute, ...] = (
    Attribute(
        "city",
        "{entity} lives in {value}.",
        "In which city does {entity} live?",
        _values("Lisbon, Oslo, Nairobi, Kyoto, Lima, Tallinn, Hanoi, Porto, Quito, Dakar, Perth, Zagreb"),
        "{entity} has moved to {value}.",
    ),
    Attribute(
        "job",
        "{entity} works as a {value}.",
        "What does {entity} work as?",
        _values(
            "glassblower, beekeeper, cartographer, locksmith, ferry pilot, tailor, botanist, clockmaker, "
            "stonemason, librarian, puppeteer, surveyor"
        ),
        "{entity} has changed jobs and now works as a {value}.",
    ),
    Attribute(
        "pet",
        "{entity} has a pet {value}.",
        "What pet does {entity} have?",
        _values(
            "ferret, parrot, tortoise, hedgehog, goldfish, iguana, rabbit, chinchilla, gecko, canary, axolotl, donkey"
        ),
        "{entity} gave away the old pet and now has a pet {value}.",
    ),
    Attribute(
        "colour",
        "{entity}'s favourite colour is {value}.",
        "What is {entity}'s favourite colour?",
        _values("teal, crimson, amber, violet, ochre, indigo, olive, magenta, turquoise, scarlet, lilac, navy"),
        "{entity}'s favourite colour is now {value}.",
    ),
    Attribute(
        "instrument",
        "{entity} plays the {value}.",
        "What instrument does {entity} play?",
        _values("cello, oboe, banjo, harp, bassoon, accordion, trombone, ukulele, zither, marimba, bagpipes, sitar"),
        "{entity} has switched instruments and now plays the {value}.",
    ),
    Attribute(
        "birth_year",
        "{entity} was born in {value}.",
        "In what year was {entity} born?",
        tuple(str(year) for year in range(1951, 2003, 4)),
    ),
    Attribute(
        "sport",
        "{entity}'s favourite sport is {value}.",
        "What is {entity}'s favourite sport?",
        _values(
            "fencing, rowing, curling, archery, handball, squash, judo, lacrosse, badminton, water polo, cricket, "
            "sailing"
        ),
        "{entity}'s favourite sport is now {value}.",
    ),
    Attribute(
        "food",
        "{entity}'s favourite food is {value}.",
        "What is {entity}'s favourite food?",
        _values(
            "dumplings, paella, lentil soup, pancakes, risotto, falafel, goulash, sushi, tacos, ratatouille, couscous, "
            "pierogi"
        ),
        "{entity}'s favourite food is now {value}.",
    ),
)
BY_NAME = {attribute.name: attribute for attribute in ATTRIBUTES}
MAX_ENTITIES = min(len(attribute.values) for attribute in ATTRIBUTES) - 2  # leave values for look-alikes

# Syllables for invented names: unusual onsets and vowel pairs keep them clear of real people.
_ONSETS = _values("b, d, f, g, k, l, m, n, p, r, s, t, v, z, br, dr, kr, qu, th, vr, zh")
_VOWELS = ("a", "e", "i", "o", "u", "ae", "ei", "ou", "y")
_CODAS = ("", "", "", "n", "r", "l", "s", "th", "x", "nd")
_LEAD_INS = ("", "By the way, ", "I heard that ", "Someone mentioned that ", "Fun fact: ", "Apparently ")
_MAX_DRAWS = 200


def generate_synthetic_tasks(
    num_tasks: int,
    *,
    seed: int = 0,
    entities_per_task: int = 3,
    attributes_per_entity: int = 3,
    distractors_per_task: int = 5,
    revisions: int = 0,
    distractor_sentences: int = 1,
    revised_question_share: float = 1.0,
    restate_unchanged: bool = False,
) -> list[Task]:
    """``num_tasks`` tasks, ids ``synthetic-{seed}-{i}``; the same arguments always give the same tasks.

    ``entities_per_task`` invented people each get ``attributes_per_entity`` Stage-1 facts; the
    question asks one attribute of one of them; ``distractors_per_task`` texts fill Stage 2.
    ``revisions`` > 0: that many stated facts change in later Stage-1 messages ("Velora Quint has moved to
    Lima."), one per message after the people's paragraphs, and the question asks the current value of one of
    them, so a memory of the old value left in place competes with the new one at retrieval (Update or Delete).
    ``revised_question_share`` < 1: only that share of tasks with revisions asks a changed fact; the rest ask a
    fact that did not change (any person's, the changed person's other facts included), so storing only the
    change fails them and deleting or overwriting the stale entry loses its unchanged facts: only a rewrite
    (Update) answers both kinds.
    ``restate_unchanged``: a change message also restates the person's unchanged facts ("Velora Quint has moved
    to Lima. Velora Quint plays the cello."), so it can replace the stale entry whole: overwriting that entry with
    the message as it came loses nothing, and the fix costs one ``Update_memory`` the size of an ``Add_memory``.
    ``distractor_sentences``: look-alike sentences in each distractor (one Stage-2 message each); more make a
    long Stage 2 whose messages an agent must filter or summarise to stay inside a prompt budget.
    """
    _check_int("num_tasks", num_tasks, 1)
    _check_int("seed", seed, None)
    _check_int("entities_per_task", entities_per_task, 1, MAX_ENTITIES)
    _check_int("attributes_per_entity", attributes_per_entity, 1, len(ATTRIBUTES))
    _check_int("distractors_per_task", distractors_per_task, 0, 50)
    _check_int("revisions", revisions, 0, min(entities_per_task * attributes_per_entity, MAX_ENTITIES))
    _check_int("distractor_sentences", distractor_sentences, 1, 20)
    _check_share("revised_question_share", revised_question_share)
    if not isinstance(restate_unchanged, bool):
        raise ConfigError(f"restate_unchanged={restate_unchanged!r} must be true or false")
    if restate_unchanged and not revisions:
        raise ConfigError(
            "restate_unchanged=true restates a person's unchanged facts in the message that changes one, but "
            "revisions=0 changes nothing: set revisions >= 1 or restate_unchanged=false"
        )
    if revisions and revised_question_share < 1 and entities_per_task * attributes_per_entity <= revisions:
        raise ConfigError(
            f"revised_question_share={revised_question_share} asks some questions about a fact that does not change, "
            f"but all {entities_per_task * attributes_per_entity} facts change (revisions={revisions}): state more "
            "facts (entities_per_task, attributes_per_entity) or set the share to 1"
        )
    if revisions and entities_per_task + revisions > MAX_ENTITIES + 2:
        raise ConfigError(
            f"entities_per_task + revisions = {entities_per_task + revisions} must be <= {MAX_ENTITIES + 2}: "
            "every person and every revised value needs its own value of an attribute"
        )
    shape = _Shape(
        entities_per_task,
        attributes_per_entity,
        distractors_per_task,
        revisions,
        distractor_sentences,
        revised_question_share,
        restate_unchanged,
    )
    return [_generate_task(seed, index, shape) for index in range(num_tasks)]


def fact_statements(count: int, *, seed: int = 0) -> list[tuple[str, str]]:
    """``count`` pairs ``(sentence, value)`` of random invented people and attributes, ("Velora Quint plays
    the cello.", "cello"): the statements a reader quotes before answering (``agemem.train.sft.answer_copy_rows``)."""
    _check_int("count", count, 0)
    rng = random.Random(f"synthetic-statements/{seed}")
    pairs = []
    for _ in range(count):
        attribute = rng.choice(ATTRIBUTES)
        first, last = _name(rng)
        value = rng.choice(attribute.values)
        pairs.append((attribute.state(f"{first} {last}", value), value))
    return pairs


def news_title(entity: str) -> str:
    """The title of the Stage-1 paragraph changing a fact of ``entity`` ("A friend told me about Velora Quint's
    news. Velora Quint has moved to Lima.")."""
    return f"{entity}'s news"


def _check_int(name: str, value: object, low: int | None, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name}={value!r} must be an integer")
    if low is not None and value < low:
        raise ConfigError(f"{name}={value} must be >= {low}")
    if high is not None and value > high:
        raise ConfigError(f"{name}={value} must be <= {high}")


def _check_share(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise ConfigError(f"{name}={value!r} must be a number in [0, 1]")


@dataclass(frozen=True)
class _Shape:
    """What every task of one call has in common (the arguments of :func:`generate_synthetic_tasks`)."""

    entities: int
    attributes: int
    distractors: int
    revisions: int
    sentences: int
    revised_question_share: float
    restate_unchanged: bool = False


def _generate_task(seed: int, index: int, shape: _Shape) -> Task:
    # a string seed is hashed with SHA-512 by `random`, so the stream is stable across runs and platforms
    rng = random.Random(f"synthetic/{seed}/{index}")
    for _ in range(_MAX_DRAWS):
        task = _draw_task(rng, seed, index, shape)
        if task is not None and _is_clean(task):
            return task
    raise RuntimeError(f"could not draw a clean synthetic task {index} for seed {seed}; this is a generator bug")


def _syllable(rng: random.Random) -> str:
    return rng.choice(_ONSETS) + rng.choice(_VOWELS)


def _name(rng: random.Random) -> tuple[str, str]:
    first = "".join(_syllable(rng) for _ in range(rng.choice((2, 3)))) + rng.choice(_CODAS[:5])
    last = "".join(_syllable(rng) for _ in range(rng.choice((1, 2)))) + rng.choice(_CODAS)
    return first.capitalize(), last.capitalize()


def _lookalike(rng: random.Random, first: str, last: str) -> str:
    """A name that reads like ``first last`` but is not it: one part kept, the other redrawn or nudged."""
    other_first, other_last = _name(rng)
    kind = rng.randrange(3)
    if kind == 0:
        return f"{first} {other_last}"
    if kind == 1:
        return f"{other_first} {last}"
    # nudge: swap one letter of the last name for another of its kind (vowel for vowel), keeping it pronounceable
    position = rng.randrange(1, len(last)) if len(last) > 1 else 0
    kind_letters = "aeiou" if last[position].lower() in "aeiouy" else "lnrstvkmd"
    letter = rng.choice([c for c in kind_letters if c != last[position].lower()])
    if position == 0:
        letter = letter.upper()
    return f"{first} {last[:position]}{letter}{last[position + 1 :]}"


def _distinct(names: list[str], candidate: str) -> bool:
    """No name contains another, so every mention of a person is unambiguous."""
    low = candidate.lower()
    return all(low not in other.lower() and other.lower() not in low for other in names)


def _draw_task(rng: random.Random, seed: int, index: int, shape: _Shape) -> Task | None:
    n_entities, n_attributes, n_distractors = shape.entities, shape.attributes, shape.distractors
    n_revisions, n_sentences = shape.revisions, shape.sentences
    people: list[tuple[str, str]] = []
    while len(people) < n_entities:
        first, last = _name(rng)
        if _distinct([f"{a} {b}" for a, b in people], f"{first} {last}"):
            people.append((first, last))
    names = [f"{first} {last}" for first, last in people]

    # values of one attribute are distinct across the task's people, so a fact names its person uniquely
    pool = {attribute.name: rng.sample(attribute.values, len(attribute.values)) for attribute in ATTRIBUTES}
    facts: dict[str, dict[str, str]] = {}
    for name in names:
        chosen = rng.sample(ATTRIBUTES, n_attributes)
        facts[name] = {attribute.name: pool[attribute.name].pop() for attribute in chosen}

    contexts = []
    for name in names:
        sentences = [BY_NAME[key].state(name, value) for key, value in facts[name].items()]
        contexts.append(Paragraph(title=name, sentences=sentences))

    # revisions: stated facts that change later, each in its own Stage-1 message after the people's paragraphs
    changeable = [(name, key) for name in names for key in facts[name] if BY_NAME[key].revision is not None]
    if len(changeable) < n_revisions:
        return None
    revised = rng.sample(changeable, n_revisions)
    changes: list[dict[str, str]] = []
    for name, key in revised:
        if not pool[key]:
            return None
        old, new = facts[name][key], pool[key].pop()
        changes.append({"entity": name, "attribute": key, "old": old, "new": new})
        facts[name][key] = new
        sentences = [BY_NAME[key].revise(name, new)]
        if shape.restate_unchanged:  # the person's other facts as Stage 1 stated them: the message replaces it whole
            sentences += [BY_NAME[other].state(name, value) for other, value in facts[name].items() if other != key]
        contexts.append(Paragraph(title=news_title(name), sentences=sentences))

    # the default share (1) draws nothing here, so those tasks are the ones generated before the setting existed
    asks_change = bool(changes) and (shape.revised_question_share >= 1.0 or rng.random() < shape.revised_question_share)
    if asks_change:  # the question asks a changed fact: the current value is the answer
        change = rng.choice(changes)
        entity, asked = change["entity"], BY_NAME[change["attribute"]]
        target = names.index(entity)
        answer = change["new"]
        support = SupportingFact(news_title(entity), 0, asked.revise(entity, answer))
    elif changes:  # a fact that did not change, of any person
        changed = set(revised)
        kept = [(name, key) for name in names for key in facts[name] if (name, key) not in changed]
        entity, key = rng.choice(kept)
        target, asked = names.index(entity), BY_NAME[key]
        answer = facts[entity][key]
        support = SupportingFact(entity, list(facts[entity]).index(key), asked.state(entity, answer))
    else:
        target = rng.randrange(n_entities)
        entity = names[target]
        asked = BY_NAME[rng.choice(list(facts[entity]))]
        answer = facts[entity][asked.name]
        support = SupportingFact(entity, list(facts[entity]).index(asked.name), asked.state(entity, answer))

    # what reward.terms=current judges memory against: every person's facts as they stand after the last message
    superseded = [
        {
            "stale": BY_NAME[c["attribute"]].state(c["entity"], c["old"]),
            "by": BY_NAME[c["attribute"]].revise(c["entity"], c["new"]),
        }
        for c in changes
    ]
    changed_now = {
        (c["entity"], c["attribute"]): BY_NAME[c["attribute"]].revise(c["entity"], c["new"]) for c in changes
    }
    current = [
        changed_now.get((name, key), BY_NAME[key].state(name, value))
        for name in names
        for key, value in facts[name].items()
    ]

    texts: list[str] = []
    pending: list[str] = []  # the sentences of the distractor being written
    attempts = 0
    while len(texts) < n_distractors:
        attempts += 1
        if attempts > 20 * (n_distractors + 1) * n_sentences:
            return None
        sentence = _distractor_sentence(rng, people, names, facts, target, asked)
        if sentence is None or sentence in pending:
            continue
        pending.append(sentence)
        if len(pending) < n_sentences:
            continue
        text, pending = rng.choice(_LEAD_INS) + " ".join(pending), []
        if answer.lower() in text.lower() or text in texts:
            continue
        texts.append(text)

    return Task(
        id=f"synthetic-{seed}-{index}",
        question=asked.ask(entity),
        answer=answer,
        contexts=contexts,
        supporting_facts=[support],
        metadata={
            "source": "synthetic",
            "type": "revised-fact" if asks_change else "unchanged-fact" if changes else "single-fact",
            "seed": seed,
            "index": index,
            "entity": entity,
            "attribute": asked.name,
            **({"revisions": changes} if changes else {}),
            CURRENT_FACTS_KEY: current,
            SUPERSEDED_FACTS_KEY: superseded,
        },
        distractors=texts,
    )


def _distractor_sentence(
    rng: random.Random,
    people: list[tuple[str, str]],
    names: list[str],
    facts: dict[str, dict[str, str]],
    target: int,
    asked: Attribute,
) -> str | None:
    """One look-alike sentence of the kinds in the module docstring, or None when the draw is unusable."""
    kind = rng.choice(("lookalike", "lookalike", "lookalike-other", "new-attribute"))
    if kind == "new-attribute":
        person = rng.choice(names)
        unused = [a for a in ATTRIBUTES if a.name not in facts[person]]
        if not unused:
            return None
        attribute = rng.choice(unused)
        return attribute.state(person, rng.choice(attribute.values))
    first, last = people[target] if kind == "lookalike" or rng.random() < 0.5 else rng.choice(people)
    other = _lookalike(rng, first, last)
    if not _distinct(names, other):
        return None
    attribute = asked if kind == "lookalike" else rng.choice(ATTRIBUTES)
    return attribute.state(other, rng.choice(attribute.values))


def _is_clean(task: Task) -> bool:
    """The invariants in the module docstring; a False sends the caller back to draw again."""
    answer = task.answer.lower()
    support = task.supporting_facts[0]
    sentences = [s for p in task.contexts for s in p.sentences]
    # distinct sentences: a change message's restatement of a fact repeats its sentence word for word
    if answer in task.question.lower() or len({s for s in sentences if answer in s.lower()}) != 1:
        return False
    if answer not in support.text.lower() or any(answer in d.lower() for d in task.distractors):
        return False
    asked = BY_NAME[task.metadata["attribute"]]
    entity = task.metadata["entity"]
    # a revised fact's old statement is meant to be there (stale); nothing else may give the asked person a value
    stale = {
        c["old"] for c in task.metadata.get("revisions", []) if (c["entity"], c["attribute"]) == (entity, asked.name)
    }
    others = [v for v in asked.values if v != task.answer and v not in stale]
    conflicting = {asked.state(entity, v) for v in others}
    if asked.revision is not None:
        conflicting |= {asked.revise(entity, v) for v in asked.values if v != task.answer}
    return not any(c in text for c in conflicting for text in sentences + task.distractors)


def load_synthetic_tasks(config: TaskRunConfig) -> list[Task]:
    synthetic = config.data.synthetic
    return generate_synthetic_tasks(
        synthetic.num_tasks,
        seed=synthetic.seed,
        entities_per_task=synthetic.entities_per_task,
        attributes_per_entity=synthetic.attributes_per_entity,
        distractors_per_task=synthetic.distractors_per_task,
        revisions=synthetic.revisions,
        distractor_sentences=synthetic.distractor_sentences,
        revised_question_share=synthetic.revised_question_share,
        restate_unchanged=synthetic.restate_unchanged,
    )


SYNTHETIC_PARAPHRASES = (
    "{q}",
    "Quick question: {q}",
    "Remind me, {q}",
    "Do you happen to know this? {q}",
    "I forgot something. {q}",
    "Tell me please: {q}",
)
"""the wordings a synthetic stream asks a question in (its families recur in paraphrase)."""


def synthetic_items(total: int, families: int, seed: int, show_context: bool) -> list[StreamItem]:
    """``total`` items over ``families`` questions: item i asks family ``i mod families`` in one of
    :data:`SYNTHETIC_PARAPHRASES` (drawn from a stream seeded by ``seed`` and i), so each question recurs in a
    few wordings.

    Each family is a task of :func:`generate_synthetic_tasks` (seed ``seed``); the first
    eight families ask eight different attributes (city, job, pet, ...), so their questions differ in wording and
    not only in the person's name. The prompt carries the task's facts when ``show_context``.
    """
    pool = generate_synthetic_tasks(max(4 * families, 32), seed=seed)
    by_attribute: dict[str, list[Task]] = {}
    for task in pool:
        by_attribute.setdefault(task.metadata["attribute"], []).append(task)
    chosen: list[Task] = []
    round_index = 0
    while len(chosen) < families:  # one task per attribute, then a second round, ...
        added = False
        for tasks in by_attribute.values():
            if round_index < len(tasks) and len(chosen) < families:
                chosen.append(tasks[round_index])
                added = True
        if not added:
            raise ConfigError(f"stream.synthetic_families={families} is more than the generator can draw; lower it")
        round_index += 1
    items = []
    for i in range(total):
        family = i % families
        task = chosen[family]
        rng = random.Random(f"stream-synthetic/{seed}/{i}")
        query = rng.choice(SYNTHETIC_PARAPHRASES).format(q=task.question)
        prompt = f"Question: {query}"
        if show_context:
            facts = "\n".join(f"- {p.text}" for p in task.contexts)
            prompt += f"\n\nFacts:\n{facts}"
        attribute = BY_NAME[task.metadata["attribute"]]
        items.append(
            StreamItem(
                id=f"synthetic-stream-{seed}-{i}",
                query=query,
                prompt=prompt,
                answer=task.answer,
                task_key=f"family-{family}",
                ground_truth=qa_execution(task.supporting_facts[0].text, task.answer),
                metadata={
                    "family": family,
                    "attribute": attribute.name,
                    "alternatives": [v for v in attribute.values if v != task.answer],
                },
            )
        )
    return items


def stream_items(config: Any) -> list[StreamItem]:
    """`agemem eval stream --task synthetic`: ``stream.synthetic_tasks`` items over ``stream.synthetic_families``
    questions of generator seed ``data.synthetic.seed``."""
    stream = config.stream
    return synthetic_items(
        stream.synthetic_tasks, stream.synthetic_families, config.data.synthetic.seed, stream.show_context
    )


EVALUATION = Evaluation(
    "synthetic recall tasks (data.synthetic.*) as three-stage memory episodes: J, EM, F1, MQ, TN, TC",
    "data.limit",
    title="Synthetic",
)
"""`agemem eval synthetic`: the generated tasks of ``data.synthetic`` (seed, size, revisions), scored as HotpotQA."""

SYNTHETIC = register_task(
    QATask("synthetic", load_synthetic_tasks, evaluation=EVALUATION, stream=StreamSpec("qa", stream_items))
)
