"""`agemem demo`: one scripted three-stage episode on a real HotpotQA question.

The "agent" is a script that writes responses in the AgeMem format; they go through the
real parser and environment, so the demo shows exactly what a policy's tool calls do:
store facts (Stage 1), filter a distractor and summarise (Stage 2), retrieve and answer
(Stage 3). Context and memory are printed after every step.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from agemem.core.configlib import ConfigError
from agemem.core.env import EnvResources, MemoryEnv, StepResult
from agemem.core.resources import resolve
from agemem.core.tools import LTM_TOOLS
from agemem.tasks.config import AgentConfig


@dataclass
class DemoConfig:
    data: str = "bundled:hotpotqa"
    """HotpotQA JSON file for `agemem demo`; default: the 100-question dev sample shipped with the package."""
    example: int = 0
    """index of the HotpotQA question the demo episode plays."""

    def validate(self) -> None:
        if self.example < 0:
            raise ConfigError(f"example={self.example} must be >= 0")


@dataclass
class DemoRunConfig(AgentConfig):
    """`agemem demo`'s root: the shared sections plus which question the scripted episode plays."""

    demo: DemoConfig = field(default_factory=DemoConfig)
    """the scripted demo episode (`agemem demo`)."""


@dataclass
class DemoQuestion:
    question: str
    answer: str
    paragraphs: dict[str, list[str]]
    supporting: dict[str, list[str]]
    """title -> supporting sentences (the text, not only the title)."""
    distractors: list[str]
    """paragraphs from other questions, for Stage 2."""


def load_demo_question(path: str, index: int) -> DemoQuestion:
    file = Path(resolve(path))
    if not file.is_file():
        raise ConfigError(f"demo.data={path!r}: no such file; give a HotpotQA JSON file (official format)")
    try:
        records = json.loads(file.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"demo.data={path!r} is not JSON ({err}); give a HotpotQA JSON file (official format)"
        ) from err
    if not isinstance(records, list) or not all(isinstance(r, dict) and "context" in r for r in records):
        raise ConfigError(f"demo.data={path!r} is not in the HotpotQA format (a list of questions with 'context')")
    if not 0 <= index < len(records) - 2:
        raise ConfigError(f"demo.example={index} is out of range for {file.name}; use 0..{len(records) - 3}")
    record = records[index]
    paragraphs = {title: sentences for title, sentences in record["context"]}
    supporting: dict[str, list[str]] = {}
    for title, sentence_id in record["supporting_facts"]:
        sentences = paragraphs.get(title, [])
        if sentence_id < len(sentences):
            supporting.setdefault(title, []).append(sentences[sentence_id].strip())
    distractors = [" ".join(other["context"][0][1]).strip() for other in records[index + 1 : index + 3]]
    return DemoQuestion(record["question"], record["answer"], paragraphs, supporting, distractors)


def _act(thought: str, calls: list[dict[str, Any]] | None = None, answer: str | None = None) -> str:
    text = f"<think>{thought}</think>\n"
    if calls:
        text += f"<tool_call>{json.dumps(calls, ensure_ascii=False)}</tool_call>"
    else:
        text += f"<answer>{answer}</answer>"
    return text


def scripted_episode(env: MemoryEnv, q: DemoQuestion) -> Iterator[tuple[str, str, StepResult]]:
    """Drive the env through three stages; yield (stage title, model text, step result)."""
    shown = list(q.supporting)[:2] + [t for t in q.paragraphs if t not in q.supporting][:1]
    env.set_stage(1)
    for title in shown:
        env.add_user(f"Something I read today about {title}: {' '.join(q.paragraphs[title]).strip()}", kind="fact")
        if title in q.supporting:
            fact = " ".join(q.supporting[title])
            text = _act(
                f"This is about {title}; worth keeping.",
                [
                    {
                        "name": "Add_memory",
                        "arguments": {"content": fact, "metadata": {"tags": [title]}, "memory_type": "fact"},
                    }
                ],
            )
            yield "Stage 1 · store", text, env.step(text)
            text = _act("Stored.", answer="Thanks, noted.")
        else:
            text = _act("Nothing here I expect to need.", answer="Interesting, thanks.")
        yield "Stage 1 · reply", text, env.step(text)

    env.reset_context()
    env.set_stage(2)
    first, second = q.distractors
    env.add_user(f"Unrelated, but: {first}", kind="distractor")
    criteria = first.split(". ")[0]
    text = _act(
        "Off-topic; drop it from the context.", [{"name": "Filter_context", "arguments": {"criteria": criteria}}]
    )
    yield "Stage 2 · filter", text, env.step(text)
    text = _act("Done.", answer="OK.")
    yield "Stage 2 · reply", text, env.step(text)
    env.add_user(f"Also: {second}", kind="distractor")
    text = _act("Compress what is here.", [{"name": "Summary_context", "arguments": {"span": "all"}}])
    yield "Stage 2 · summarise", text, env.step(text)

    env.set_stage(3)
    env.add_user(q.question, question=True)
    text = _act(
        "I stored facts on this earlier.", [{"name": "Retrieve_memory", "arguments": {"query": q.question, "top_k": 3}}]
    )
    yield "Stage 3 · retrieve", text, env.step(text)
    text = _act("The retrieved facts answer it.", answer=q.answer)
    yield "Stage 3 · answer", text, env.step(text)


def _context_table(env: MemoryEnv, tokens: int) -> Table:
    table = Table(
        title=f"Short-term context · {tokens} tokens / {env.config.context.max_context_tokens}",
        show_lines=False,
        expand=True,
    )
    for column in ("#", "round", "role", "kind", "content"):
        table.add_column(column, overflow="fold", ratio=6 if column == "content" else None)
    for i, m in enumerate(env.context.messages):
        preview = " ⏎ ".join(line for line in m.content.splitlines() if line.strip())
        preview = preview if len(preview) <= 160 else preview[:157] + "…"
        table.add_row(str(i), str(m.round), m.role, m.kind + (" 🔒" if m.protected else ""), preview)
    return table


def _memory_table(env: MemoryEnv) -> Table:
    table = Table(title=f"Long-term memory · {len(env.ltm.entries(scope=env.scope))} entries", expand=True)
    for column in ("id", "stage", "content"):
        table.add_column(column, overflow="fold", ratio=6 if column == "content" else None)
    for entry in env.ltm.entries(scope=env.scope):
        table.add_row(entry.id, str(entry.metadata.get("stage")), entry.content[:220])
    return table


def run_demo(config: DemoRunConfig, console: Console | None = None, out: str | None = None) -> MemoryEnv:
    console = console or Console()
    q = load_demo_question(config.demo.data, config.demo.example)
    env_config = config.env
    if env_config.summarizer.backend == "policy":
        # A scripted demo has no policy model to write summaries with.
        env_config = replace(env_config, summarizer=replace(env_config.summarizer, backend="extractive"))
        console.print(
            "[dim]summaries: extractive (no policy model in the demo; "
            "env.summarizer.backend=openai env.summarizer.model=NAME uses an endpoint)[/dim]"
        )
    with console.status("loading encoder and tokenizer"):
        resources = EnvResources.build(env_config)
    env = MemoryEnv(resources, scope="demo")
    console.print(Panel(f"[bold]{q.question}[/bold]\ngold answer: {q.answer}", title="HotpotQA question"))
    for title, text, result in scripted_episode(env, q):
        console.rule(f"[bold cyan]{title}")
        console.print(Panel(text, title="agent", border_style="green"))
        for tool_result in result.tool_results:
            console.print(
                Panel(
                    tool_result.to_text()[:600],
                    title=f"tool · {tool_result.name}",
                    border_style="blue" if tool_result.ok else "red",
                )
            )
        console.print(_context_table(env, result.tokens_after))
        if any(call.name in LTM_TOOLS for call in result.parsed.tool_calls):  # show LTM only when it changed
            console.print(_memory_table(env))
    stats = env.stats
    console.rule("[bold]episode summary")
    console.print(
        f"answer: {result.answer!r} (gold {q.answer!r}) · adds {len(stats.ops('add'))} · "
        f"filters removed {sum(len(f.removed_contents) for f in stats.filters)} · summaries {len(stats.summaries)} · "
        f"retrievals {len(stats.retrievals)} · violations {len(stats.violations)} · "
        f"peak context {stats.max_context_tokens} tokens"
    )
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(
            json.dumps(
                {"question": q.question, "answer": result.answer, "gold": q.answer, "stats": stats.to_json()},
                indent=2,
                ensure_ascii=False,
            )
        )
        console.print(f"episode record written to {out}")
    return env
