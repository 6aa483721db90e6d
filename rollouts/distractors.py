"""Stage-2 distractor generators and the per-task disk cache.

Distractors are produced once per task and shared by all K rollouts of that task (paper
Algorithm 1; the authors' code regenerated them per rollout, defect 5): a GRPO group must
differ only in what the agent did, never in what it was shown. They are cached on disk,
keyed by the task and the generator's fingerprint, so later epochs and runs reuse them.

Generators:
* :class:`CorpusDistractors` (default, offline): paragraphs of *other* tasks closest to the
  question in embedding space that do not contain the answer — topically tempting, useless.
* :class:`LLMDistractors`: an OpenAI-compatible endpoint writes them, related or unrelated.
* :class:`StaticDistractors`: a fixed list from the config.
* :class:`TaskDistractors`: the ones a task carries (synthetic tasks make look-alike facts).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from tqdm.auto import tqdm

from agemem.core.configlib import ConfigError
from agemem.core.encoders import Encoder
from agemem.core.files import atomic_open, cache_setting_dir
from agemem.core.summarizers import ChatGenerate
from agemem.core.text import contains_answer, strip_thinking
from agemem.rollouts.config import DistractorConfig
from agemem.rollouts.messages import casual, task_rng
from agemem.rollouts.records import Task


class DistractorGenerator(Protocol):
    fingerprint: str
    """identifies the generator and its settings; part of the cache key."""

    def generate(self, task: Task, count: int) -> list[str]: ...


class CorpusDistractors:
    """The ``count`` paragraphs of other tasks most similar to the question, answer-free.

    A paragraph is skipped when its title is one of the task's own paragraphs (it could be a
    gold paragraph under another task's id) or when it contains the answer as whole words.
    """

    def __init__(
        self,
        pool: Sequence[Task],
        encoder: Encoder,
        batch_size: int = 256,
        *,
        vector_dir: Path | None = None,
        progress: bool = False,
    ):
        seen: dict[str, str] = {}
        for task in pool:
            for paragraph in task.contexts:
                if paragraph.text and paragraph.title not in seen:
                    seen[paragraph.title] = paragraph.text
        if not seen:
            raise ConfigError("the corpus distractor pool has no paragraphs; load more tasks or use another generator")
        self.titles = list(seen)
        self.texts = [seen[t] for t in self.titles]
        self.encoder = encoder
        self.batch_size = batch_size
        self.vector_dir = vector_dir
        self.progress = progress
        self._vectors_ND: np.ndarray | None = None  # encoded on first use: a warm cache never needs them
        digest = hashlib.sha1("\n".join(self.titles).encode()).hexdigest()[:12]
        self.fingerprint = f"corpus:{getattr(encoder, 'name', 'encoder')}:{digest}"

    def vectors(self) -> np.ndarray:
        """The corpus's paragraph vectors [N, D]: from ``vector_dir`` when a run encoded this corpus with this
        encoder before (the README's first run spent 44 s here), else encoded with a progress bar and stored."""
        if self._vectors_ND is None:
            self._vectors_ND = self._stored()
        if self._vectors_ND is None:
            step = self.batch_size
            with tqdm(
                total=len(self.texts), desc="encoding distractor corpus", unit="paragraph", disable=not self.progress
            ) as bar:
                batches = []
                for i in range(0, len(self.texts), step):
                    batches.append(self.encoder.encode(self.texts[i : i + step]))
                    bar.update(len(batches[-1]))
            self._vectors_ND = np.concatenate(batches)
            self._store(self._vectors_ND)
        return self._vectors_ND

    def _vector_path(self) -> Path | None:
        if self.vector_dir is None:
            return None
        # the fingerprint names the encoder and the titles; the texts are hashed too (same titles, new text)
        key = hashlib.sha1(json.dumps([self.fingerprint, self.texts]).encode()).hexdigest()[:20]
        return self.vector_dir / f"{key}.npy"

    def _stored(self) -> np.ndarray | None:
        path = self._vector_path()
        if path is None or not path.is_file():
            return None
        try:
            vectors_ND = np.load(path, allow_pickle=False)
        except (OSError, ValueError):  # torn or foreign: encode again
            return None
        return vectors_ND if vectors_ND.ndim == 2 and len(vectors_ND) == len(self.texts) else None

    def _store(self, vectors_ND: np.ndarray) -> None:
        path = self._vector_path()
        if path is not None:
            with atomic_open(path, "wb") as handle:
                np.save(handle, vectors_ND, allow_pickle=False)

    def generate(self, task: Task, count: int) -> list[str]:
        own_titles = {p.title for p in task.contexts}
        similarity_N = self.vectors() @ self.encoder.encode([task.question])[0]
        rng = task_rng(task.id, "distractors")
        chosen: list[str] = []
        for row in np.argsort(-similarity_N, kind="stable"):
            title, text = self.titles[row], self.texts[row]
            if title in own_titles or contains_answer(f"{title} {text}", task.answer):
                continue
            chosen.append(casual(title, text, rng))
            if len(chosen) == count:
                return chosen
        raise ConfigError(
            f"the corpus has only {len(chosen)} usable paragraph(s) for task {task.id!r} (of {count} distractors "
            f"asked): load more tasks into the pool, lower distractors.count, or use another generator"
        )


DISTRACTOR_PROMPTS = {
    "related": (
        "Write one casual message a user might send to a chat assistant. It is about the same topic as the "
        "question below (same people, places or subject), sounds useful, but must NOT contain or hint at the "
        "answer. Write only the message, 2-4 sentences.\n\nQuestion: {question}\nAnswer to avoid: {answer}\n"
        "Message #{index}:"
    ),
    "unrelated": (
        "Write one casual message a user might send to a chat assistant about an everyday subject (plans, food, "
        "hobbies, work) that has nothing to do with the question below. Write only the message, 2-4 sentences."
        "\n\nQuestion: {question}\nMessage #{index}:"
    ),
}


class LLMDistractors:
    """Distractors written by a chat model; a message revealing the answer is retried, then dropped."""

    def __init__(self, generate: ChatGenerate, style: str, fingerprint: str, attempts: int = 3):
        if style not in DISTRACTOR_PROMPTS:
            raise ConfigError(f"style={style!r}: choose one of {', '.join(DISTRACTOR_PROMPTS)}")
        self.generate_text = generate
        self.style = style
        self.attempts = attempts
        self.fingerprint = f"llm:{style}:{fingerprint}"
        """``fingerprint`` names the endpoint and its settings, so changing them does not reuse cached text."""

    def generate(self, task: Task, count: int) -> list[str]:
        messages: list[str] = []
        for index in range(1, count + 1):
            prompt = DISTRACTOR_PROMPTS[self.style].format(question=task.question, answer=task.answer, index=index)
            for _ in range(self.attempts):
                try:
                    text = strip_thinking(self.generate_text([{"role": "user", "content": prompt}]))
                except Exception as err:  # the endpoint's own error says which URL failed and why
                    raise RuntimeError(
                        f"distractor generation for task {task.id!r} failed: {err}; check distractors.base_url "
                        "and distractors.model, or use distractors.generator=corpus (offline)"
                    ) from err
                if text and not contains_answer(text, task.answer):
                    messages.append(text)
                    break
        return messages


class StaticDistractors:
    """The configured texts, in order, cycled when there are fewer than ``count``."""

    def __init__(self, texts: Sequence[str]):
        if not texts:
            raise ConfigError("static distractors need at least one text (distractors.texts=[...])")
        self.texts = list(texts)
        self.fingerprint = "static:" + hashlib.sha1("\n".join(self.texts).encode()).hexdigest()[:12]

    def generate(self, task: Task, count: int) -> list[str]:
        return [self.texts[i % len(self.texts)] for i in range(count)]


class TaskDistractors:
    """The distractors the task itself carries (the synthetic generator writes look-alike facts)."""

    fingerprint = "task"

    def generate(self, task: Task, count: int) -> list[str]:
        if count and not task.distractors:
            raise ConfigError(
                f"task {task.id!r} carries no distractors; distractors.generator=task is for synthetic tasks, "
                "use corpus, llm or static for this data"
            )
        return list(task.distractors[:count])


class DistractorCache:
    """One small JSON file per (task, generator, count), written atomically."""

    def __init__(self, directory: str | os.PathLike[str]):
        self.directory = Path(directory)

    def path(self, task: Task, fingerprint: str, count: int) -> Path:
        key = hashlib.sha1(json.dumps([task.id, task.question, fingerprint, count]).encode()).hexdigest()[:20]
        return self.directory / f"{key}.json"

    def get(self, task: Task, fingerprint: str, count: int) -> list[str] | None:
        path = self.path(task, fingerprint, count)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):  # absent or torn: regenerate
            return None
        texts = data.get("distractors") if isinstance(data, dict) else None
        return texts if isinstance(texts, list) and all(isinstance(t, str) for t in texts) else None

    def put(self, task: Task, fingerprint: str, count: int, texts: list[str]) -> None:
        record = {"task_id": task.id, "generator": fingerprint, "count": count, "distractors": texts}
        with atomic_open(self.path(task, fingerprint, count)) as handle:
            json.dump(record, handle, ensure_ascii=False, indent=1)


def prepare_distractors(
    tasks: Sequence[Task],
    generator: DistractorGenerator,
    count: int,
    cache: DistractorCache | None = None,
    *,
    progress: bool = False,
) -> dict[str, list[str]]:
    """``{task.id: distractor messages}``, generated once per task (cache first)."""
    result: dict[str, list[str]] = {}
    for task in tqdm(tasks, desc="distractors", unit="task", disable=not progress):
        if task.id in result:
            continue
        texts = cache.get(task, generator.fingerprint, count) if cache else None
        if texts is None:
            texts = generator.generate(task, count) if count else []
            if cache:
                cache.put(task, generator.fingerprint, count, texts)
        result[task.id] = texts
    return result


def distractor_cache_dir(config: DistractorConfig) -> Path | None:
    """``distractors.cache_dir`` resolved: None when empty (no cache), the user's cache for ``auto``."""
    return cache_setting_dir(config.cache_dir, "distractors")


def distractor_cache(config: DistractorConfig) -> DistractorCache | None:
    directory = distractor_cache_dir(config)
    return DistractorCache(directory) if directory is not None else None


def build_distractor_generator(
    config: DistractorConfig, pool: Sequence[Task], encoder: Encoder, *, progress: bool = False
) -> DistractorGenerator:
    """The generator named by ``config.generator``; ``pool`` feeds the corpus generator, whose paragraph
    vectors are kept beside the distractor cache (``corpus_vectors/``) and encoded with a bar on ``progress``."""
    if config.generator == "corpus":
        directory = distractor_cache_dir(config)
        vector_dir = directory / "corpus_vectors" if directory is not None else None
        return CorpusDistractors(pool, encoder, vector_dir=vector_dir, progress=progress)
    if config.generator == "static":
        return StaticDistractors(config.texts)
    if config.generator == "task":
        return TaskDistractors()
    from agemem.core.httpclient import ChatClient

    settings = f"{config.base_url}|{config.model}|t={config.temperature}|max={config.max_tokens}"
    return LLMDistractors(ChatClient.from_settings(config), config.style, settings)
