"""`agemem config`: a command's effective config, each value marked with the source that set it.

Sources, later ones winning: the dataclass default, each YAML file of the ``--config`` chain (the farthest
``extends`` base first), then the command line's ``key=value`` overrides. The output is YAML (it loads back to the
same values) with the source as an end-of-line comment.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from agemem.core.configlib import parse_override, read_yaml_layers, set_dotted, to_dict
from agemem.entrypoints.roots import load_command_config

DEFAULT = "default"
OVERRIDE = "override"


def traced_config(command: str, path: str | Path | None, overrides: list[str]) -> tuple[Any, dict[str, str]]:
    """``(config, sources)``: ``command``'s effective root and, for each dotted key any source set, the last one
    that did (a file's path, or ``override``); keys absent from ``sources`` hold their default."""
    config = load_command_config(command, path, overrides)
    layers: list[tuple[str, Mapping[str, Any]]] = [
        (str(file), mapping) for file, mapping in (read_yaml_layers(path) if path is not None else [])
    ]
    typed: dict[str, Any] = {}
    for item in overrides:
        set_dotted(typed, *parse_override(item))
    layers.append((OVERRIDE, typed))
    sources: dict[str, str] = {}
    for label, mapping in layers:
        for dotted in _leaves(mapping):
            sources[dotted] = label
    return config, sources


def _leaves(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def source_of(dotted: str, sources: Mapping[str, str]) -> str:
    """The source of ``dotted``: its own, else that of the nearest section set as a whole, else the default."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        found = sources.get(".".join(parts[:end]))
        if found is not None:
            return found
    return DEFAULT


def annotated_yaml(tree: Mapping[str, Any], sources: Mapping[str, str]) -> str:
    """``tree`` as block YAML, one value a line, each ending in ``# <source>``."""
    return "".join(_lines(tree, sources, "", 0))


def _lines(tree: Mapping[str, Any], sources: Mapping[str, str], prefix: str, depth: int) -> Iterator[str]:
    indent = "  " * depth
    for key, value in tree.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            yield f"{indent}{_key(key)}:\n"
            yield from _lines(value, sources, f"{dotted}.", depth + 1)
        else:
            yield f"{indent}{_key(key)}: {_flow(value)}  # {source_of(dotted, sources)}\n"


def _flow(value: Any) -> str:
    """``value`` in YAML flow style, on one line."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_key(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(item) for item in value) + "]"
    return _scalar(value)


_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n"}


def _key(key: Any) -> str:
    """A mapping key: bare when YAML reads it back as the same string, else quoted."""
    text = str(key)
    return text if _PLAIN_KEY.fullmatch(text) and text.lower() not in _YAML_WORDS else _scalar(key)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a double-quoted YAML scalar: every string reads back as itself
    return yaml.safe_dump(value, default_flow_style=True).split("\n", 1)[
        0
    ]  # null, true, 3, 1.0e-05 as YAML writes them


def print_config(command: str, path: str | Path | None, overrides: list[str]) -> str:
    config, sources = traced_config(command, path, overrides)
    return annotated_yaml(to_dict(config), sources)
