"""A matrix file's checks around its expansion: schema errors at file, line and key, size limits, duplicates.

Every check answers with Problems (file, line, key) so expansion reports them all together; a matrix too
large to expand is refused from its axis lengths alone, before any cell exists.
"""

from __future__ import annotations

from packaging.version import Version
from pydantic import ValidationError

from builder.core.errors import InputError, Problem
from builder.core.tags import tag_problems
from builder.matrix import suggest
from builder.matrix.schema import MatrixFile
from builder.matrix.yamlsrc import LocatedYaml, PathKey


def validate(located: LocatedYaml) -> MatrixFile:
    """The file against the schema; every violation at its place in the file (InputError)."""
    if not isinstance(located.data, dict):
        raise InputError([located.problem((), "the matrix file must be a mapping")])
    try:
        return MatrixFile.model_validate(located.data)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            # Drop pydantic's markers for validators and dict keys: they are not part of the YAML path.
            path = tuple(p for p in err["loc"]
                         if not (isinstance(p, str) and (p.startswith("function-") or p == "[key]")))
            problems.append(located.problem(_in_file(located.data, path), _message(err, path)))
        raise InputError(problems) from exc


MAX_CELLS = 10_000
"""Most cells a matrix may expand to, product and includes together (the production matrix: 540)."""
MAX_EXCLUDE_CHECKS = 100_000
"""Most (product cell, exclude) pairs matched; each costs about 10 us, and every exclude meets every cell."""


def check_size(located: LocatedYaml, model: MatrixFile) -> None:
    """Refuse a matrix too large to expand, from the axis lengths alone, before any cell exists."""
    axes = model.matrix
    rocm = sum(p != "cpu" for p in axes.platform)
    lengths = {"os": len(axes.os), "torch": len(axes.torch), "flavor": len(axes.flavor),
               "channel": len(axes.channel)}
    product = rocm * len(axes.gfx) + len(axes.platform) - rocm  # the gfx axis multiplies rocm platforms only
    for n in lengths.values():
        product *= n
    shape = " x ".join(f"{n} {axis}" for axis, n in lengths.items())
    shape += f" x ({rocm} rocm platforms x {len(axes.gfx)} gfx + {len(axes.platform) - rocm} cpu)"
    cells = product + len(model.include)
    includes = f", plus {len(model.include):,} includes" if model.include else ""
    if cells > MAX_CELLS:
        raise InputError([located.problem(("matrix",), (
            f"expands to {cells:,} cells ({shape} = {product:,}{includes}), over the limit of {MAX_CELLS:,}: "
            "shorten the longest axes or split the matrix into several files"))])
    checks = product * len(model.exclude)
    if checks > MAX_EXCLUDE_CHECKS:
        raise InputError([located.problem(("exclude",), (
            f"{len(model.exclude)} excludes over {product:,} product cells ({shape}) are {checks:,} matches, over "
            f"the limit of {MAX_EXCLUDE_CHECKS:,}: merge excludes (a key's list matches any of its values) or "
            "shorten the axes"))])


def include_tag_problems(located: LocatedYaml, model: MatrixFile) -> list[Problem]:
    """An include's own tag is held to the tag policy: not `latest`, not shaped like an immutable tag."""
    return [located.problem(("include", i, "tag"), message)
            for i, inc in enumerate(model.include) if inc.tag is not None for message in tag_problems(inc.tag)]


def _in_file(data: object, path: PathKey) -> PathKey:
    """Cut a path where it leaves the file: `exclude[0].torch[0]` for a scalar the schema made a list."""
    for i, part in enumerate(path):
        if isinstance(part, int) and not isinstance(data, list):
            return path[:i]
        inside_list = isinstance(data, list) and isinstance(part, int) and part < len(data)
        found = inside_list or (isinstance(data, dict) and part in data)
        data = data[part] if found else None  # type: ignore[index]
    return path


def _message(err: object, path: PathKey) -> str:
    assert isinstance(err, dict)
    kind, msg = err.get("type"), str(err.get("msg"))
    if kind == "extra_forbidden":
        return suggest.unknown_key(path)
    if kind == "literal_error":
        return msg + suggest.literal_choice(err.get("input"), str((err.get("ctx") or {}).get("expected", "")))
    if kind == "string_pattern_mismatch":
        return f"{err.get('input')!r} is not allowed here: it {msg.removeprefix('String ')}"
    return msg.removeprefix("Value error, ")


def duplicate_axis_values(located: LocatedYaml, model: MatrixFile) -> list[Problem]:
    problems = []
    axes = model.matrix
    for name, values in (("os", axes.os), ("platform", axes.platform), ("gfx", axes.gfx),
                         ("flavor", axes.flavor), ("channel", axes.channel),
                         ("torch", [Version(t.version) for t in axes.torch])):
        seen: set[object] = set()
        for i, value in enumerate(values):
            if value in seen:
                problems.append(located.problem(("matrix", name, i), f"duplicate value {str(value)!r}"))
            seen.add(value)
    return problems
