"""The README's commands stay true: every one parses, names files that exist and loads its configuration (default
suite, seconds); and every one runs, in order, with tiny limits (``-m slow``: ``python -m pytest -m slow
tests/agemem/test_readme.py``, about 15 minutes on 2 cores).

Commands are read from the README's ``bash`` blocks as a user would copy them: continuation lines joined, ``&&``
chains split. The run works in a scratch folder holding links to ``configs/``, ``launch/``, ``tests/`` and ``.ci/`` so
every relative path of the README resolves and every output lands in the scratch folder.
"""

from __future__ import annotations

import ast
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import tomllib

from agemem.entrypoints.cli import parse_command_line
from agemem.entrypoints.roots import load_command_config, load_eval_config
from tests.games_support import shared_data
from tests.recipes.test_learn import FAST as LEARN_FAST  # `agemem learn` at its own end-to-end test's toy size

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
OPERATORS = {"&&", "||", ";", "|", "{", "}", "(", ")"}
REDIRECTIONS = {">", ">>", "<", "2>", "&>"}


@dataclass(frozen=True)
class ShellCommand:
    """One simple command of a README ``bash`` block."""

    line: int
    """README line where the command's (joined) line starts."""
    words: tuple[str, ...]
    """the command and its arguments, quotes removed, environment assignments and redirections dropped."""
    comment: str = ""
    """the comment at the end of its line (what the README says about it)."""
    env: dict[str, str] = field(default_factory=dict)
    """``NAME=value`` assignments before the command."""

    def __str__(self) -> str:
        return f"README.md:{self.line}: {shlex.join(self.words)}"


def code_blocks(text: str, language: str) -> list[tuple[int, list[str]]]:
    """``(line of the first code line, lines)`` of every fenced block in ``language``."""
    blocks, current, start = [], None, 0
    for number, line in enumerate(text.splitlines(), 1):
        if current is None and line.strip() == f"```{language}":
            current, start = [], number + 1
        elif current is not None and line.strip() == "```":
            blocks.append((start, current))
            current = None
        elif current is not None:
            current.append(line)
    return blocks


def shell_commands(text: str) -> list[ShellCommand]:
    """Every simple command of the ``bash`` blocks, in README order."""
    commands = []
    for start, lines in code_blocks(text, "bash"):
        joined: list[tuple[int, str]] = []
        for offset, line in enumerate(lines):
            if joined and joined[-1][1].endswith("\\"):
                joined[-1] = (joined[-1][0], joined[-1][1][:-1] + " " + line.strip())
            else:
                joined.append((start + offset, line))
        for number, line in joined:
            code, comment = line, ""
            if found := re.search(r"(^|\s)#\s", line):  # a comment: a `#` that starts a word
                code, comment = line[: found.start()], line[found.end() :]
            lexer = shlex.shlex(code, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            words: list[str] = []
            for token in [*lexer, ";"]:
                if token in OPERATORS:
                    if words:
                        commands.append(_command(number, words, comment.strip()))
                    words = []
                else:
                    words.append(token)
    return commands


def _command(line: int, words: list[str], comment: str) -> ShellCommand:
    env = {}
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    kept, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in REDIRECTIONS:
            skip = True
        else:
            kept.append(word)
    return ShellCommand(line, tuple(kept), comment, env)


COMMANDS = shell_commands(README.read_text())
AGEMEM = [c for c in COMMANDS if c.words[0] == "agemem"]


def make_scratch(folder: Path) -> Path:
    """``folder`` made a working folder where the README's relative paths resolve (links to configs/, launch/,
    tests/, .ci/), as the repository root is for a user; what commands write lands in it."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("configs", "launch", "tests", ".ci"):
        (folder / name).symlink_to(ROOT / name)
    return folder


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(make_scratch(tmp_path / "work"))
    return tmp_path / "work"


def load_for_check(argv: list[str]) -> None:
    """What the command's handler does before any work: parse, then load and validate its configuration(s).
    ``--resume``, ``export``, ``chat`` and ``tools`` read files earlier commands write: parsing is their check."""
    from agemem.entrypoints import cli
    from agemem.eval.compare import benchmark_overrides, check_benchmarks

    _, args = parse_command_line(argv)
    command = args.command
    if command == "train" and (args.resume or args.resume_from):
        return
    if command in ("demo", "rollout", "train", "plan", "config"):
        load_command_config("plan" if command == "train" and args.dry_run else command, args.config, args.overrides)
    elif command == "learn":
        load_command_config("learn", args.config, args.overrides)
    elif command == "eval" and args.benchmark == "stream":
        load_eval_config(args.config, cli._stream_overrides(args), args.model or [], command="stream")
    elif command == "eval":
        load_eval_config(args.config, cli._eval_overrides(args), args.model or [])
    elif command == "compare":
        for name in check_benchmarks(args.benchmark or []):
            overrides = benchmark_overrides(
                name, args.overrides, models=args.model or [], variants=args.variant or [], limit=args.limit
            )
            load_eval_config(args.config, overrides, args.model or [])
    else:
        assert command in ("export", "chat", "tools"), f"add a check for `agemem {command}`"


# ---------------------------------------------------------------------------------------- default suite: seconds


def test_the_readme_shows_the_commands_a_user_needs():
    names = {c.words[1] for c in AGEMEM}
    assert {"train", "eval", "compare", "export", "chat", "learn", "plan", "rollout", "demo"} <= names
    # the parser reads the README as a user copies it: the continued compare line is one command
    (compare,) = [c for c in AGEMEM if c.words[1] == "compare"]
    assert "--reference" in compare.words and "--out" in compare.words


@pytest.mark.parametrize("command", AGEMEM, ids=str)
def test_every_readme_agemem_command_parses_and_loads_its_config(command, scratch):
    load_for_check(list(command.words[1:]))


def test_every_file_a_readme_command_names_exists_and_scripts_parse(scratch):
    named: list[tuple[ShellCommand, str]] = []
    for command in COMMANDS:
        words = list(command.words)
        named += [(command, words[i + 1]) for i, w in enumerate(words[:-1]) if w in ("--config", "--accelerate-config")]
        named += [(command, value) for value in command.env.values() if value.endswith((".yaml", ".sh"))]
        if words[0] == "bash":
            named.append((command, words[1]))
            check = subprocess.run(["bash", "-n", words[1]], capture_output=True, text=True)
            assert check.returncode == 0, f"{command}: {check.stderr}"
    assert named
    for command, path in named:
        assert Path(path).is_file(), f"{command}: {path} does not exist"


def test_the_readme_installs_extras_that_exist_and_runs_markers_that_exist():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    extras = set(project["project"]["optional-dependencies"])
    markers = {m.split(":")[0] for m in project["tool"]["pytest"]["ini_options"]["markers"]}
    installs = [c for c in COMMANDS if c.words[:2] == ("pip", "install")]
    asked = {e for c in installs for w in c.words if (m := re.match(r"^\.\[(.+)\]$", w)) for e in m.group(1).split(",")}
    assert asked and asked <= extras, f"extras the README installs and pyproject.toml lacks: {asked - extras}"
    pytests = [c for c in COMMANDS if c.words[:3] == ("python", "-m", "pytest")]
    run = {c.words[c.words.index("-m", 3) + 1] for c in pytests if "-m" in c.words[3:]}
    assert run and run <= markers, f"markers the README runs and pyproject.toml lacks: {run - markers}"


def test_the_readme_test_command_is_what_ci_runs():
    """.ci/run is the README's set-up-and-test line (pip's quiet flags aside): a README that drifted would send users
    down a path CI never walked."""
    script = (ROOT / ".ci" / "run").read_text()
    chain = script[script.index("\n", script.index("\nexport ") + 1) :].replace(
        "python -m pip install -q", "pip install"
    )
    ci = shell_commands("```bash\n" + chain.strip() + "\n```")
    test_line = next(c.line for c in COMMANDS if c.words[:2] == ("ruff", "check"))
    readme = [c for c in COMMANDS if c.line == test_line]
    assert len(ci) > 10 and [(c.words, c.env) for c in ci] == [(c.words, c.env) for c in readme]


def test_the_readme_python_imports_what_the_package_exports():
    (start, lines), *_ = code_blocks(README.read_text(), "python")
    tree = ast.parse("\n".join(lines))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = __import__(node.module, fromlist=[a.name for a in node.names])
            for alias in node.names:
                assert hasattr(module, alias.name), f"README.md:{start}: {node.module} has no {alias.name}"


def test_a_command_naming_a_game_or_baseline_is_skipped_where_its_extra_is_missing(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "alfworld" else real(name, *a))
    for words in (("agemem", "train", "--config", "configs/alfworld_tiny_cpu.yaml"), ("agemem", "eval", "alfworld")):
        assert missing_extra(words) == "pip install 'agemem[alfworld]'"
    assert missing_extra(("agemem", "eval", "hotpotqa")) == ""


# ------------------------------------------------------------------------------- slow tier: every command runs

TRAIN_FAST = ["rollout.rollouts_per_task=2", "train.tasks_per_step=1", "sampling.max_tokens=16"]
"""a smaller step for every `agemem train` (the steps the README asks for are kept: `--resume` continues them)."""
EVAL_FAST = ["sampling.max_tokens=16"]
EXTRAS = {  # a benchmark or training task a command names -> (its extra, the modules and programs it needs)
    "alfworld": ("alfworld", ("alfworld", "textworld"), ()),
    "sciworld": ("sciworld", ("scienceworld",), ("java",)),
    "pddl": ("pddl", ("pyperplan",), ()),
    "babyai": ("babyai", ("minigrid",), ()),
    "mem0": ("baselines", ("mem0",), ()),
    "amem": ("baselines", ("agentic_memory",), ()),
    "locomo": ("locomo", ("nltk",), ()),
}


def missing_extra(words: tuple[str, ...]) -> str:
    """The extra a command needs and this environment lacks ("" when none)."""
    import importlib.util
    import shutil

    text = " ".join(words)
    for name, (extra, modules, programs) in EXTRAS.items():
        if not re.search(rf"(?<![a-z]){name}(?![a-z])", text):  # `alfworld_tiny_cpu.yaml` names ALFWorld too
            continue
        if any(importlib.util.find_spec(m) is None for m in modules) or any(shutil.which(p) is None for p in programs):
            return f"pip install 'agemem[{extra}]'" + (" and a Java runtime" if programs else "")
    return ""


def tiny(command: ShellCommand) -> list[str] | str:
    """The command's arguments with tiny limits, or why it is not run here."""
    words = list(command.words)
    if words[0] != "agemem":
        return "not an agemem command (installs, the test suite, launch scripts)"
    if "GPU" in command.comment:
        return "needs a GPU"
    if missing := missing_extra(command.words):
        return missing
    name, argv = words[1], words[1:]
    if name == "train" and "--resume" not in argv:
        return [*argv, *TRAIN_FAST]
    if name == "eval" and argv[1] == "locomo":  # LoCoMo is never shipped: the shared copy, one session of one talk
        data = shared_data("locomo")
        if data is None:
            return "LoCoMo's data (CC BY-NC 4.0, not shipped) is not on this machine"
        argv[argv.index("--data") + 1] = str(data / "locomo10.json")
        argv += ["--conversations", "conv-26", "locomo.sessions=1"]
    if name in ("eval", "compare"):
        if "--limit" not in argv:
            argv += ["--limit", "1"]
        elif int(argv[argv.index("--limit") + 1]) > 5:  # an example sized for a real run
            argv[argv.index("--limit") + 1] = "1"
        if "--split" in argv:  # the bundled test games are ALFWorld's valid_seen only
            argv[argv.index("--split") + 1] = "valid_seen"
        return argv if any(w.startswith("sampling.max_tokens=") for w in argv) else [*argv, *EVAL_FAST]
    if name == "learn":
        return [re.sub(r"^learn\.seeds=.*", "learn.seeds=[0,1]", word) for word in argv] + LEARN_FAST
    return argv


@dataclass
class Ran:
    """One README command as :func:`run_readme` ran it (or did not)."""

    command: ShellCommand
    argv: list[str] | None
    """what ran (``agemem`` + these); None: skipped."""
    why_skipped: str = ""
    seconds: float = 0.0
    returncode: int = 0
    output: str = ""
    """the end of its stdout and stderr."""


CHAT_INPUT = "Remember that my sister lives in Oslo.\n/memories\n/exit\n"


def run_readme(work: Path, timeout_s: float = 1800) -> Iterator[Ran]:
    """Every ``agemem`` command of the README in README order with :func:`tiny` limits, in ``work`` (made by
    :func:`make_scratch`), yielding each as it ends; then the README's Python example (argv ``python -c ...``)."""
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "ALFWORLD_DATA": str(ROOT / "tests" / "data" / "alfworld"),
        "PYTHONPATH": str(ROOT),
    }
    for command in AGEMEM:
        argv = tiny(command)
        if isinstance(argv, str):
            yield Ran(command, None, argv)
            continue
        started = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "agemem.entrypoints.cli", *argv],
            input=CHAT_INPUT if argv[0] == "chat" else "",
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=work,
            env=env,
        )
        output = (done.stdout + done.stderr)[-4000:]
        yield Ran(command, argv, "", time.monotonic() - started, done.returncode, output)
    (start, lines), *_ = code_blocks(README.read_text(), "python")
    started = time.monotonic()
    example = subprocess.run(
        [sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True, timeout=timeout_s, cwd=work, env=env
    )
    python = ShellCommand(start, ("python", "<the README's Python example>"))
    yield Ran(
        python, ["python", "-c", "..."], "", time.monotonic() - started, example.returncode, example.stderr[-4000:]
    )


@pytest.mark.slow
def test_every_readme_command_runs_in_order_with_tiny_limits(scratch):
    """Each README command, in README order (training creates what evaluation and export read), exits 0; the Python
    example runs against the export. Prints a table: command, seconds, or why it did not run."""
    rows = []
    for ran in run_readme(scratch):
        shown = "skipped: " + ran.why_skipped if ran.argv is None else f"{ran.seconds:.0f} s"
        rows.append((str(ran.command), shown))
        assert ran.returncode == 0, f"{ran.command}\n$ agemem {shlex.join(ran.argv or [])}\n{ran.output}"
        if ran.argv and ran.argv[0] == "chat":
            assert re.search(r"\(\d+ memor(y|ies)\)", ran.output)  # the /memories listing answered
    assert (scratch / "memory.sqlite").is_file()  # the Python example's long-term memory
    width = max(len(command) for command, _ in rows)
    print("\n" + "\n".join(f"{command:<{width}}  {shown}" for command, shown in rows))
