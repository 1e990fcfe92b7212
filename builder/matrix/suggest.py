"""Did-you-mean for a matrix file: the key or value a typo was meant to be, and the line of the value at fault.

A misspelt key (`flavour:`) or value (`flavor: [dev]`, `os: [debain-12]`) is refused by the schema; this says
which spelling it knows that is closest, from the schema itself (the keys allowed where the typo stands) or the
values the error lists. A torch version the compatibility data does not know drops every cell of it; when that
leaves nothing to build, the problem is the version's own line, not the `matrix:` line.
"""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from pydantic import BaseModel

from builder.core import facts
from builder.core.errors import Problem
from builder.core.facts import torch_minor
from builder.matrix.schema import MatrixFile
from builder.matrix.yamlsrc import LocatedYaml, PathKey


def did_you_mean(word: object, choices: typing.Iterable[object]) -> str:
    """'; did you mean 'flavor'?' for the closest choice, or '' when none is close."""
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def keys_at(path: PathKey, model: type[BaseModel] = MatrixFile) -> list[str]:
    """The keys the schema allows at path (list indexes skipped), [] where path leaves the schema's models."""
    current = model
    for part in path:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part)
        found = _models_in(field.annotation) if field is not None else []
        if not found:
            return []
        current = found[0]
    return [field.alias or name for name, field in current.model_fields.items()]


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]


def unknown_key(path: PathKey) -> str:
    """The message for a key the schema does not know at path."""
    allowed = keys_at(path[:-1])
    guess = did_you_mean(path[-1], allowed)
    return f"unknown key{guess}" if guess or not allowed else f"unknown key (known here: {', '.join(allowed)})"


def literal_choice(value: object, expected: str) -> str:
    """did_you_mean over the values a pydantic literal_error lists (`'runtime' or 'devel'`)."""
    return did_you_mean(value, re.findall(r"'([^']*)'", expected))


def unknown_torch(located: LocatedYaml, model: MatrixFile) -> list[Problem]:
    """One problem per torch entry of the matrix whose minor version has no compatibility data, at its line."""
    known = facts.compat().torch
    raw = located.data.get("matrix", {}).get("torch") if isinstance(located.data, dict) else None
    problems = []
    for i, entry in enumerate(model.matrix.torch):
        minor = torch_minor(entry.version)
        if minor in known:
            continue
        dict_entry = isinstance(raw, list) and i < len(raw) and isinstance(raw[i], dict)
        path: PathKey = ("matrix", "torch", i, "version") if dict_entry else ("matrix", "torch", i)
        listed = ", ".join(sorted(known, key=lambda v: tuple(int(n) for n in v.split("."))))
        problems.append(located.problem(path, f"no compatibility data for torch {minor} (builder/data/compat.yaml "
                                              f"knows {listed})"))
    return problems
