"""YAML loading that remembers where every key came from.

PyYAML's safe_load forgets line numbers, silently keeps the last of two duplicate keys and turns
`torch: 2.10` into the float 2.1. Composing with the BaseLoader keeps every scalar a string (pydantic
converts where a number or bool is really meant) and lets us record a line for each path.

A matrix file is a few kilobytes of plain data, so everything past that is refused before the work grows
(each refusal an InputError naming the file, and the line where there is one):
- only a regular file is read (stat before open: opening a FIFO would block), at most MAX_BYTES of it;
- aliases (`*name`) are refused outright: a matrix never needs one, and expanding them is how a few hundred
  bytes become gigabytes (the "billion laughs"); an anchor (`&name`) alone is harmless and allowed;
- nesting deeper than MAX_DEPTH and more than MAX_NODES nodes are refused while the event stream is read,
  before PyYAML's recursive composer can overflow the stack or pure-Python parsing takes seconds.
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from builder.core import safefs
from builder.core.errors import InputError, Problem

PathKey = tuple[str | int, ...]

MAX_BYTES = 256 * 1024
"""Largest matrix file read. The production matrix is 1.5 KB; pure-Python YAML costs about 1.5 s per MiB."""
MAX_DEPTH = 32
"""Deepest nesting of mappings and sequences; a matrix needs 4 (exclude -> list -> mapping -> list)."""
MAX_NODES = 10_000
"""Most scalars, mappings and sequences in one file (the production matrix has about 100)."""


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
        if isinstance(part, int) or not part.isprintable():  # a key with control characters is shown escaped
            out += f"[{part!r}]"
        else:
            out += f".{part}" if out else part
    return out or "(top level)"


def load_located(file: Path) -> LocatedYaml:
    """Parse file; syntax errors, duplicate keys and files past the limits become an InputError naming file and line."""
    text = _read(file)
    try:
        loader = _BoundedLoader(file, text)  # the reader refuses control characters here, before parsing
        try:
            node = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.reader.ReaderError as exc:
        message = f"unacceptable character #x{exc.character:04x}: {exc.reason}"
        raise InputError([Problem(file, text.count("\n", 0, exc.position) + 1, "(syntax)", message)]) from exc
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


def _read(file: Path) -> str:
    """At most MAX_BYTES of a regular file (core.safefs.read_regular, links followed), decoded."""
    def refuse(message: str) -> InputError:
        return InputError([Problem(file, None, "(file)", message)])

    try:
        raw = safefs.read_regular(file, MAX_BYTES, follow=True)
    except safefs.UnsafePath as exc:
        raise refuse(f"{exc.strerror} for a matrix file" if exc.errno == errno.EFBIG
                     else f"cannot read: {exc.strerror}") from exc
    except OSError as exc:
        raise refuse(f"cannot read: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise refuse(f"not UTF-8 text (byte {exc.start})") from exc


class _BoundedLoader(yaml.BaseLoader):
    """BaseLoader that checks every event as the composer takes it: no alias, bounded depth and node count.

    The composer takes every event through get_event, one at a time, so a refusal comes before it recurses
    past MAX_DEPTH or holds more than MAX_NODES nodes.
    """

    def __init__(self, file: Path, text: str) -> None:
        super().__init__(text)
        self.file = file
        self.depth = 0
        self.nodes = 0

    def get_event(self) -> yaml.Event:
        event: yaml.Event = super().get_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._refuse(event, "(alias)", f"alias *{event.anchor} is not allowed in a matrix file "
                         "(aliases can expand a few bytes into gigabytes); write the value out")
        if isinstance(event, yaml.NodeEvent):
            self.nodes += 1
            if self.nodes > MAX_NODES:
                self._refuse(event, "(size)", f"more than {MAX_NODES:,} values, over the limit for a matrix file")
        if isinstance(event, yaml.CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                self._refuse(event, "(nesting)", f"nested more than {MAX_DEPTH} levels deep, over the limit "
                             "for a matrix file")
        elif isinstance(event, yaml.CollectionEndEvent):
            self.depth -= 1
        return event

    def _refuse(self, event: yaml.Event, key: str, message: str) -> None:
        line = event.start_mark.line + 1 if event.start_mark is not None else None
        raise InputError([Problem(self.file, line, key, message)])


def _walk(node: yaml.Node, path: PathKey, out: LocatedYaml, problems: list[Problem]) -> Any:
    out.lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):  # `? [a, b]`: a list or mapping as a key
                problems.append(Problem(out.file, key_node.start_mark.line + 1, dotted(path),
                                        "a key must be plain text, not a list or mapping"))
                continue
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
