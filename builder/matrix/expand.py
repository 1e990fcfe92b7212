"""Stage 1: matrix file -> validated CellSpecs, and the cells the compatibility rules dropped (with why).

Expansion follows GitHub Actions' mental model: the cartesian product of the axes, minus every `exclude`
that matches, plus every `include` as an extra complete cell. Product cells that cannot work are dropped
with the rule's reason; an explicit include that cannot work is an error unless it carries an override.
Problems are collected and reported together, each with file, line and key.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path

from packaging.version import Version

from builder.core import channels, facts
from builder.core.errors import InputError, Problem
from builder.core.spec import CellSpec
from builder.core.tags import readable_tag
from builder.matrix import checks, compat, indexes, suggest
from builder.matrix.schema import Exclude, Include, MatrixFile, TorchRelease
from builder.matrix.yamlsrc import LocatedYaml, PathKey, load_located


@dataclass(frozen=True)
class _Draft:
    """A cell before its derived fields are filled in; path points at where it came from."""

    os: str
    platform: str
    torch: TorchRelease
    gfx: str | None
    flavor: str
    channel: str
    path: PathKey
    user: str | None = None
    tag: str | None = None
    expect_torch: str | None = None
    override: str | None = None


@dataclass(frozen=True)
class Dropped:
    cell: CellSpec
    rule: str
    reason: str
    override: str | None = None  # the maintainer's reason for building it anyway
    decided_on: str = ""  # the line and index the rules read (indexes.decided_on); "" for the matrix's excludes

    @property
    def explained(self) -> str:
        """The reason as --explain prints it: with the line and index the decision used."""
        return f"{self.reason} {self.decided_on}" if self.decided_on else self.reason


def why_all_dropped(dropped: list[Dropped]) -> str:
    """Each distinct reason once, with its count: the error a fully dropped matrix must still explain."""
    counts: dict[tuple[str, str], int] = {}
    for d in dropped:
        counts[(d.rule, d.explained)] = counts.get((d.rule, d.explained), 0) + 1
    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    return "".join(f"; {n} dropped by {rule}: {reason}" for (rule, reason), n in ranked)


@dataclass
class Expansion:
    """The cells to build, and those dropped (each with why) or built despite a rule.

    A matrix's excludes usually remove most of its product (the production matrix: 5,568 of 7,232 drafts), and
    only --explain and `builder matrix --format json` read them: they are finished into cells when first asked for.
    """

    default_os: str = ""  # the first os of the matrix: where `latest` points
    cells: list[CellSpec] = field(default_factory=list)
    ruled_out: list[Dropped] = field(default_factory=list)  # dropped by a compatibility rule
    overridden: list[Dropped] = field(default_factory=list)
    excluded: Callable[[], list[Dropped]] = field(default=list, repr=False)  # the matrix's excludes, finished late

    @cached_property
    def dropped(self) -> list[Dropped]:
        """Every dropped cell: the excluded ones (in product order), then those a rule dropped."""
        return [*self.excluded(), *self.ruled_out]


def load_matrix(file: Path) -> list[CellSpec]:
    """The cells to build; raises InputError listing every problem."""
    return expand_matrix(file).cells


def expand_matrix(file: Path) -> Expansion:
    """Parse, validate, expand and prune a matrix file."""
    located = load_located(file)
    model = checks.validate(located)
    checks.check_size(located, model)
    problems = checks.duplicate_axis_values(located, model)
    duplicated_axes = bool(problems)  # duplicate values make duplicate cells: report the cause only
    product = list(_product(model))
    keys = [_key(d) for d in product]
    wanted = [_wanted(ex) for ex in model.exclude]
    kept: list[_Draft] = []
    excluded: list[tuple[_Draft, int]] = []
    for draft, key in zip(product, keys, strict=True):
        hit = next((i for i, want in enumerate(wanted) if _matches(key, want)), None)
        if hit is None:
            kept.append(draft)
        else:
            excluded.append((draft, hit))
    problems += _unused_excludes(located, wanted, keys)
    kept += [_from_include(inc, ("include", i)) for i, inc in enumerate(model.include)]
    problems += checks.include_tag_problems(located, model)
    gfx_problems = _gfx_problems(located, model, kept)
    problems += gfx_problems
    if gfx_problems:  # cells without a usable family cannot be finished; every other problem is still found
        kept = [d for d in kept if (d.platform == "cpu") == (d.gfx is None)]
    result = Expansion(default_os=model.matrix.os[0], excluded=lambda: [
        Dropped(_finish(draft, model, located), f"exclude[{hit}]",
                f"excluded by the matrix (line {located.line_of(('exclude', hit))})") for draft, hit in excluded])
    paths: dict[int, PathKey] = {}
    for draft in kept:
        cell = _finish(draft, model, located)
        paths[id(cell)] = draft.path
        broken = compat.violations(cell)
        if not broken:
            result.cells.append(cell)
        elif draft.path[0] != "include":
            on = indexes.decided_on(cell)
            result.ruled_out += [Dropped(cell, rule, reason, decided_on=on) for rule, reason in broken]
        elif draft.override:
            result.cells.append(cell)
            result.overridden += [Dropped(cell, rule, reason, draft.override, indexes.decided_on(cell))
                                  for rule, reason in broken]
        else:
            problems += [located.problem(draft.path, f"{reason} (rule {rule}; add override: {{reason: ...}} "
                                                     "to build it anyway)") for rule, reason in broken]
    if not result.cells and not problems:  # each unknown torch at its own line; any other cause as a whole
        problems += suggest.unknown_torch(located, model)
        if not problems or any(d.rule != "known-torch" for d in result.dropped):
            problems.append(located.problem(("matrix",), "the matrix expands to no cells that can be built"
                                            + why_all_dropped(result.dropped)))
    if not duplicated_axes:
        problems += _duplicate_tags(located, result.cells, paths)
    if problems:
        raise InputError(problems)
    return result


def _product(model: MatrixFile) -> Iterable[_Draft]:
    axes = model.matrix
    for os_name, platform, torch, flavor, wheels in itertools.product(
            axes.os, axes.platform, axes.torch, axes.flavor, axes.channel):
        # A cpu cell has no gfx family: the gfx axis applies to rocm platforms only.
        gfx_values: list[str | None] = list(axes.gfx) if platform != "cpu" else [None]
        for gfx in gfx_values:
            yield _Draft(os_name, platform, torch, gfx, flavor, wheels, ("matrix",))


@cache
def _version(text: str) -> Version:
    """Parsed once: every exclude is matched against every product cell (twice), a few hundred thousand times
    for a large matrix."""
    return Version(text)


_AXES = ("os", "platform", "torch", "gfx", "flavor", "channel")  # what an exclude can name, in _key's order
_Key = tuple[object, ...]
_Wanted = tuple[tuple[int, frozenset[object]], ...]  # (axis index, the values it may have), axes the exclude names


def _key(draft: _Draft) -> _Key:
    """A product draft's values on the axes an exclude can name: made once per draft, matched against each exclude."""
    return (draft.os, draft.platform, _version(draft.torch.version), draft.gfx, draft.flavor, draft.channel)


def _wanted(ex: Exclude) -> _Wanted:
    values = {"os": ex.os, "platform": ex.platform, "gfx": ex.gfx, "flavor": ex.flavor, "channel": ex.channel,
              "torch": [_version(t) for t in ex.torch] if ex.torch else None}
    return tuple((_AXES.index(axis), frozenset(v)) for axis, v in values.items() if v is not None)


def _matches(key: _Key, wanted: _Wanted) -> bool:
    return all(key[axis] in values for axis, values in wanted)


def _unused_excludes(located: LocatedYaml, wanted: list[_Wanted], keys: list[_Key]) -> list[Problem]:
    """An exclude that matches nothing is almost always a typo in a value: say so instead of ignoring it."""
    return [located.problem(("exclude", i), "matches no cell of the matrix")
            for i, want in enumerate(wanted) if not any(_matches(key, want) for key in keys)]


def _from_include(inc: Include, path: PathKey) -> _Draft:
    expect = inc.expect.torch if inc.expect else None
    override = inc.override.reason if inc.override else None
    return _Draft(inc.os, inc.platform, inc.torch, inc.gfx, inc.flavor, inc.channel, path, inc.user, inc.tag,
                  expect, override)


def _gfx_problems(located: LocatedYaml, model: MatrixFile, drafts: list[_Draft]) -> list[Problem]:
    problems = []
    if any(p != "cpu" for p in model.matrix.platform) and not model.matrix.gfx:
        problems.append(located.problem(("matrix", "platform"),
                                        "rocm platforms need at least one gfx family (matrix.gfx)"))
    for d in drafts:
        if d.path[0] != "include":
            continue
        if d.platform == "cpu" and d.gfx is not None:
            problems.append(located.problem((*d.path, "gfx"), "a cpu cell has no gfx family"))
        if d.platform != "cpu" and d.gfx is None:
            problems.append(located.problem((*d.path, "gfx"), f"a {d.platform} cell needs a gfx family"))
    return problems


def _index_url(model: MatrixFile, channel: str, platform: str, gfx: str | None, torch: str) -> str:
    """The index that serves the cell's line: the channel's own (builder.core.channels)."""
    return channels.of(channel).index_url(platform, gfx, torch, model.index_urls)


def _finish(d: _Draft, model: MatrixFile, located: LocatedYaml) -> CellSpec:
    python = facts.os_releases()[d.os].python
    tag = d.tag or readable_tag(d.platform, d.os, python, d.torch.version, d.gfx, d.flavor, d.channel)
    torchvision, torchaudio = compat.line_companions(d.channel, d.platform, d.torch, *d.torch.companions())
    return CellSpec(
        image=model.image,
        os=d.os,
        platform=d.platform,
        torch=d.torch.version,
        torchvision=torchvision,
        torchaudio=torchaudio,
        gfx=d.gfx,
        flavor=d.flavor,  # type: ignore[arg-type]
        channel=d.channel,  # type: ignore[arg-type]
        user=d.user or model.user,
        index_url=_index_url(model, d.channel, d.platform, d.gfx, d.torch.version),
        tag=tag,
        explicit_tag=d.tag is not None,
        expect_torch=d.expect_torch,
        source_url=model.source_url,
        line=located.line_of(d.path),
    )


def _duplicate_tags(located: LocatedYaml, cells: list[CellSpec], paths: dict[int, PathKey]) -> list[Problem]:
    """Tags are a cell's identity in the registry: two cells with one tag would overwrite each other."""
    problems = []
    first: dict[str, CellSpec] = {}
    for cell in cells:
        if cell.tag in first:
            problems.append(located.problem(paths[id(cell)], "duplicate cell (same tag as the cell from line "
                                                             f"{first[cell.tag].line})"))
        else:
            first[cell.tag] = cell
    return problems
