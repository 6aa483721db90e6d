"""Typed configuration plumbing: dataclass defaults, YAML overrides, dotted CLI overrides.

The dataclasses in :mod:`agemem.core.config` are the single source of truth. A YAML file only
overrides fields, and ``a.b.c=value`` strings override after that. Every value is checked
against the field's type annotation at load time, unknown keys are rejected with a
suggestion, and each dataclass may define ``validate()`` for range checks. Errors are
:class:`ConfigError` and name the key and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin, get_type_hints

import yaml

T = TypeVar("T")


class ConfigError(ValueError):
    """A configuration value or file is wrong; the message names the key and the fix."""


def load_config(cls: type[T], path: str | Path | None = None, overrides: list[str] | None = None) -> T:
    """Build ``cls`` from its defaults, then a YAML file, then ``key.sub=value`` overrides.

    A root whose sections come from registrations (``cls.composed()``: the tasks' own sections,
    :class:`agemem.tasks.config.TaskRunConfig`) is built as the class that method returns."""
    composed = getattr(cls, "composed", None)
    if composed is not None:
        cls = composed()
    raw: dict[str, Any] = {}
    if path is not None:
        raw = read_yaml(path)
    for override in overrides or []:
        key, value = parse_override(override)
        set_dotted(raw, key, value)
    return from_dict(cls, raw)


def read_yaml(path: str | Path) -> dict[str, Any]:
    """A YAML config file's mapping. ``extends: other.yaml`` (a path relative to the file) starts from that file's
    mapping and overrides it with this one's: nested mappings merge key by key, anything else is replaced."""
    merged: dict[str, Any] = {}
    for _, mapping in read_yaml_layers(path):
        merged = merge_mappings(merged, mapping)
    return merged


def read_yaml_layers(path: str | Path, _seen: tuple[Path, ...] = ()) -> list[tuple[Path, dict[str, Any]]]:
    """``[(file, its own mapping)]`` of a YAML config and the files it ``extends``, the farthest base first: what
    :func:`read_yaml` merges, kept apart so a value can be traced to the file that set it."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist; pass an existing YAML file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid YAML: {err}") from err
    if not isinstance(data, dict):
        raise ConfigError(f"config file {str(path)!r} must hold a mapping at top level, got {type(data).__name__}")
    if "extends" not in data:
        return [(path, data)]
    base = data.pop("extends")
    if not isinstance(base, str) or not base:
        raise ConfigError(f"config file {str(path)!r}: extends={base!r} must name another YAML file")
    chain = (*_seen, path.resolve())
    parent = (path.parent / base).resolve()
    if parent in chain:
        raise ConfigError(f"config file {str(path)!r}: extends {base!r} loops back to itself")
    if not parent.is_file():
        raise ConfigError(f"config file {str(path)!r}: extends {base!r}, but {parent} does not exist")
    return [*read_yaml_layers(parent, chain), (path, data)]


def merge_mappings(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` on top, mappings merged key by key (neither argument changes)."""
    merged = dict(base)
    for key, value in override.items():
        both = isinstance(value, dict) and isinstance(merged.get(key), dict)
        merged[key] = merge_mappings(merged[key], value) if both else value
    return merged


class CliText(str):
    """An override's value as typed: parsed as YAML for typed fields, kept verbatim for string fields.

    YAML 1.1 would turn ``model=0123`` into 83 and ``prompt=Answer: briefly`` into a mapping.
    """

    def as_yaml(self) -> Any:
        try:
            return yaml.safe_load(self) if self.strip() else ""
        except yaml.YAMLError:
            return str(self)


def parse_override(text: str) -> tuple[str, CliText]:
    """``"env.context.filter_threshold=0.5"`` → ``("env.context.filter_threshold", CliText("0.5"))``."""
    if "=" not in text:
        raise ConfigError(f"override {text!r} must look like key.sub=value")
    key, _, value_text = text.partition("=")
    key = key.strip().lstrip("-")
    if not key:
        raise ConfigError(f"override {text!r} has an empty key")
    return key, CliText(value_text)


def set_dotted(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"override {dotted!r}: {part!r} is a value, not a section")
        node = child
    node[parts[-1]] = value


def from_dict(cls: type[T], data: dict[str, Any], prefix: str = "") -> T:
    """Instantiate dataclass ``cls`` from a (partial) mapping, checking every value."""
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'} must be a mapping, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    hints = get_type_hints(cls)
    unknown = sorted(set(data) - set(fields))
    if unknown:
        key = unknown[0]
        close = difflib.get_close_matches(key, list(fields), n=1)
        hint = f"; did you mean '{prefix}{close[0]}'?" if close else f"; valid keys: {', '.join(sorted(fields))}"
        raise ConfigError(f"unknown config key '{prefix}{key}'{hint}")
    kwargs = {name: _coerce(hints[name], value, f"{prefix}{name}") for name, value in data.items()}
    instance = cls(**kwargs)
    if not prefix:  # validate once, from the root, so nested defaults are checked too
        validate_tree(instance)
    return instance


def validate_tree(instance: Any, prefix: str = "") -> None:
    """Run ``validate()`` on ``instance`` and every nested dataclass, prefixing errors with the path."""
    for f in dataclasses.fields(instance):
        value = getattr(instance, f.name)
        if dataclasses.is_dataclass(value):
            validate_tree(value, f"{prefix}{f.name}.")
    validate = getattr(instance, "validate", None)
    if validate is not None:
        try:
            validate()
        except ConfigError as err:
            raise ConfigError(f"{prefix}{err}") from None


def to_dict(instance: Any) -> dict[str, Any]:
    return dataclasses.asdict(instance)


def _takes_text_verbatim(annotation: Any, text: CliText) -> bool:
    """A CLI value is a plain string for ``str``, ``str | None`` (unless "null") and string Literals."""
    origin = get_origin(annotation)
    if annotation is str:
        return True
    if origin is Literal:
        return str(text) in get_args(annotation)
    if origin in (Union, types.UnionType):
        return str in get_args(annotation) and text.as_yaml() is not None
    return False


def _coerce(annotation: Any, value: Any, key: str) -> Any:
    origin = get_origin(annotation)
    if isinstance(value, CliText):
        value = str(value) if _takes_text_verbatim(annotation, value) else value.as_yaml()
    if annotation is Any:
        return value
    if dataclasses.is_dataclass(annotation):
        return from_dict(annotation, value, f"{key}.")
    if origin is Literal:
        choices = get_args(annotation)
        if not any(value == c and type(value) is type(c) for c in choices):  # True is not 1
            raise ConfigError(f"{key}={value!r} is not allowed; choose one of {', '.join(map(repr, choices))}")
        return value
    if origin in (Union, types.UnionType):
        options = get_args(annotation)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _coerce(option, value, key)
            except ConfigError as err:
                errors.append(str(err))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{key}={value!r} matches none of {annotation}")
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} must be a list, got {value!r}")
        (item_type, *_) = get_args(annotation) or (Any,)
        items = [_coerce(item_type, v, f"{key}[{i}]") for i, v in enumerate(value)]
        return items if origin is list else tuple(items)
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} must be a mapping, got {value!r}")
        (_, value_type) = get_args(annotation) or (Any, Any)
        return {name: _coerce(value_type, item, f"{key}.{name}") for name, item in value.items()}
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key} must be true or false, got {value!r}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key} must be an integer, got {value!r}")
        return value
    if annotation is float:
        if isinstance(value, str):  # YAML 1.1 reads 1e-3 as a string
            try:
                return float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key} must be a number, got {value!r}")
        return float(value)
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f'{key} must be a string, got {value!r}; quote it in YAML (e.g. "0123")')
        return value
    if isinstance(annotation, type) and not isinstance(value, annotation):
        raise ConfigError(f"{key} must be {annotation.__name__}, got {value!r}")
    return value


__all__ = [
    "ConfigError",
    "from_dict",
    "load_config",
    "parse_override",
    "read_yaml",
    "set_dotted",
    "to_dict",
]
