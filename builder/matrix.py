"""Stage 1: matrix file -> validated CellSpecs.

Expansion follows GitHub Actions' mental model: the cartesian product of the axes, minus every
`exclude` that matches, plus every `include` as an extra complete cell. Problems are collected and
reported together, each with file, line and key; nothing downstream ever sees an invalid matrix.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from packaging.version import Version
from pydantic import ValidationError

from builder.errors import InputError, Problem
from builder.schema import Exclude, Include, MatrixFile, TorchRelease
from builder.spec import CellSpec, readable_tag
from builder.yamlsrc import LocatedYaml, PathKey, load_located

PYTORCH_INDEX = "https://download.pytorch.org/whl/{platform}"  # [shared/rocm-facts.md section 3]


@dataclass(frozen=True)
class _Draft:
    """A cell before its derived fields are filled in; path points at where it came from."""

    os: str
    platform: str
    torch: TorchRelease
    gfx: str | None
    flavor: str
    path: PathKey
    user: str | None = None
    tag: str | None = None
    expect_torch: str | None = None


def load_matrix(file: Path) -> list[CellSpec]:
    """Parse, validate and expand a matrix file, or raise InputError listing every problem."""
    located = load_located(file)
    model = _validate(located)
    problems = _duplicate_axis_values(located, model)
    drafts: list[_Draft] = []
    for draft in _product(model):
        if _excluded(draft, model.exclude):
            continue
        drafts.append(draft)
    problems += _unused_excludes(located, model)
    drafts += [_from_include(inc, ("include", i)) for i, inc in enumerate(model.include)]
    problems += _gfx_problems(located, model, drafts)
    if not drafts and not problems:
        problems.append(located.problem(("matrix",), "the matrix expands to no cells (every cell is excluded)"))
    if problems:
        raise InputError(problems)
    cells = [_finish(d, model, located) for d in drafts]
    problems = _duplicate_tags(located, cells, drafts)
    if problems:
        raise InputError(problems)
    return cells


def _validate(located: LocatedYaml) -> MatrixFile:
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
            problems.append(located.problem(path, _message(err)))
        raise InputError(problems) from exc


def _message(err: object) -> str:
    assert isinstance(err, dict)
    kind, msg = err.get("type"), str(err.get("msg"))
    if kind == "extra_forbidden":
        return "unknown key"
    if kind == "string_pattern_mismatch":
        return f"{err.get('input')!r} is not allowed here: it {msg.removeprefix('String ')}"
    return msg.removeprefix("Value error, ")


def _duplicate_axis_values(located: LocatedYaml, model: MatrixFile) -> list[Problem]:
    problems = []
    axes = model.matrix
    for name, values in (("os", axes.os), ("platform", axes.platform), ("gfx", axes.gfx),
                         ("flavor", axes.flavor), ("torch", [Version(t.version) for t in axes.torch])):
        seen: set[object] = set()
        for i, value in enumerate(values):
            if value in seen:
                problems.append(located.problem(("matrix", name, i), f"duplicate value {str(value)!r}"))
            seen.add(value)
    return problems


def _product(model: MatrixFile) -> Iterable[_Draft]:
    axes = model.matrix
    for os_name, platform, torch, flavor in itertools.product(axes.os, axes.platform, axes.torch, axes.flavor):
        # A cpu cell has no gfx family: the gfx axis applies to rocm platforms only.
        gfx_values: list[str | None] = list(axes.gfx) if platform != "cpu" else [None]
        for gfx in gfx_values:
            yield _Draft(os_name, platform, torch, gfx, flavor, ("matrix",))


def _excluded(draft: _Draft, excludes: list[Exclude]) -> bool:
    return any(_matches(draft, ex) for ex in excludes)


def _matches(draft: _Draft, ex: Exclude) -> bool:
    wanted = {"os": ex.os, "platform": ex.platform, "torch": ex.torch, "gfx": ex.gfx, "flavor": ex.flavor}
    actual = {"os": draft.os, "platform": draft.platform, "torch": draft.torch.version,
              "gfx": draft.gfx, "flavor": draft.flavor}
    return all(v is None or actual[k] == v for k, v in wanted.items())


def _unused_excludes(located: LocatedYaml, model: MatrixFile) -> list[Problem]:
    """An exclude that matches nothing is almost always a typo in a value: say so instead of ignoring it."""
    problems = []
    for i, ex in enumerate(model.exclude):
        if not any(_matches(d, ex) for d in _product(model)):
            problems.append(located.problem(("exclude", i), "matches no cell of the matrix"))
    return problems


def _from_include(inc: Include, path: PathKey) -> _Draft:
    expect = inc.expect.torch if inc.expect else None
    return _Draft(inc.os, inc.platform, inc.torch, inc.gfx, inc.flavor, path, inc.user, inc.tag, expect)


def _gfx_problems(located: LocatedYaml, model: MatrixFile, drafts: list[_Draft]) -> list[Problem]:
    problems = []
    if any(p != "cpu" for p in model.matrix.platform) and not model.matrix.gfx:
        problems.append(located.problem(("matrix", "platform"),
                                        "rocm platforms need at least one family in matrix.gfx"))
    for d in drafts:
        if d.path[0] != "include":
            continue
        if d.platform == "cpu" and d.gfx is not None:
            problems.append(located.problem((*d.path, "gfx"), "a cpu cell has no gfx family"))
        if d.platform != "cpu" and d.gfx is None:
            problems.append(located.problem((*d.path, "gfx"), f"a {d.platform} cell needs a gfx family"))
    return problems


def _finish(d: _Draft, model: MatrixFile, located: LocatedYaml) -> CellSpec:
    from builder import catalog

    python = catalog.os_releases()[d.os].python
    tag = d.tag or readable_tag(d.platform, d.os, python, d.torch.version, d.gfx, d.flavor)
    return CellSpec(
        image=model.image,
        os=d.os,
        platform=d.platform,
        torch=d.torch.version,
        torchvision=d.torch.torchvision,
        torchaudio=d.torch.torchaudio,
        gfx=d.gfx,
        flavor=d.flavor,  # type: ignore[arg-type]
        user=d.user or model.user,
        index_url=model.index_urls.get(d.platform, PYTORCH_INDEX.format(platform=d.platform)),
        tag=tag,
        expect_torch=d.expect_torch,
        source_url=model.source_url,
        line=located.line_of(d.path),
    )


def _duplicate_tags(located: LocatedYaml, cells: list[CellSpec], drafts: list[_Draft]) -> list[Problem]:
    """Tags are a cell's identity in the registry: two cells with one tag would overwrite each other."""
    problems = []
    first: dict[str, CellSpec] = {}
    for cell, draft in zip(cells, drafts, strict=True):
        if cell.tag in first:
            other = first[cell.tag]
            problems.append(located.problem(draft.path, f"duplicate cell {cell.tag!r} (same as the cell "
                                                        f"from line {other.line})"))
        else:
            first[cell.tag] = cell
    return problems
