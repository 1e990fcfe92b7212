"""YAML loading that remembers where every key came from.

PyYAML's safe_load forgets line numbers, silently keeps the last of two duplicate keys and turns
`torch: 2.10` into the float 2.1. Composing with the BaseLoader keeps every scalar a string (pydantic
converts where a number or bool is really meant) and lets us record a line for each path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.errors import InputError, Problem

PathKey = tuple[str | int, ...]


@dataclass
class LocatedYaml:
    """Plain data plus a map from key path to 1-based line number."""

    file: Path
    data: Any
    lines: dict[PathKey, int] = field(default_factory=dict)

    def line_of(self, path: PathKey) -> int | None:
        """Line of the deepest recorded prefix of path (an error on a missing key points at its parent)."""
        for cut in range(len(path), -1, -1):
            line = self.lines.get(tuple(path[:cut]))
            if line is not None:
                return line
        return None

    def problem(self, path: PathKey, message: str) -> Problem:
        return Problem(self.file, self.line_of(path), dotted(path), message)


def dotted(path: PathKey) -> str:
    """matrix.torch[1].version style, the way a maintainer reads a YAML path."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out or "(top level)"


def load_located(file: Path) -> LocatedYaml:
    """Parse file; syntax errors and duplicate keys become an InputError naming file and line."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError([Problem(file, None, "(file)", f"cannot read: {exc.strerror}")]) from exc
    except UnicodeDecodeError as exc:
        raise InputError([Problem(file, None, "(file)", f"not UTF-8 text (byte {exc.start})")]) from exc
    try:
        node = yaml.compose(text, Loader=yaml.BaseLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError([Problem(file, line, "(syntax)", str(getattr(exc, "problem", exc)))]) from exc
    located = LocatedYaml(file, None)
    problems: list[Problem] = []
    located.data = _walk(node, (), located, problems) if node is not None else {}
    if problems:
        raise InputError(problems)
    return located


def _walk(node: yaml.Node, path: PathKey, out: LocatedYaml, problems: list[Problem]) -> Any:
    out.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            key = str(key_node.value)
            child = (*path, key)
            if key in result:
                problems.append(Problem(out.file, key_node.start_mark.line + 1, dotted(child),
                                        f"duplicate key (first at line {out.lines[child]})"))
                continue
            out.lines[child] = key_node.start_mark.line + 1
            result[key] = _walk(value_node, child, out, problems)
        return result
    if isinstance(node, yaml.SequenceNode):
        return [_walk(item, (*path, i), out, problems) for i, item in enumerate(node.value)]
    value = node.value
    # BaseLoader keeps every scalar a string; only plain (unquoted) null spellings mean "no value".
    if isinstance(node, yaml.ScalarNode) and node.style is None and value in NULLS:
        return None
    return value


NULLS = ("", "~", "null", "Null", "NULL")
