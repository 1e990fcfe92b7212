"""Cells -> the rows of a GitHub Actions `strategy.matrix`: one job per combination (bake group), within GitHub's limit.

A combination's images (runtime and devel of every family over one OS, Python, ROCm line and torch) are the
targets of one bake group. One job publishes them all with one `builder publish --cell A --cell B ...`, which
bakes them in one bake, so the stages they share (OS base, torch, each runtime under its devel, every family
over one torch stage) are built, stored and pushed once. The publish workflows read these rows as
`${{ matrix.<key> }}`; tests/publish/test_rows.py checks that every key a workflow reads is in every row.

A combination whose images would take more disk at their peak than the runner has (builder.publish.sizes, the
budget `--runner-disk`) is split across rows by GPU family (a devel image with its runtime family): each row names
the same bake group, and the stage they share (torch) is built once by the `stages` job into the registry cache,
which every part imports. `peak_disk` is each row's estimated peak; `runner` the label it runs on.

Pure: it renders in memory (render_all) to learn the groups, and runs nothing.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TypedDict

from builder.core.errors import usage_error
from builder.core.spec import CellSpec
from builder.publish import sizes
from builder.render.bakefile import group_of
from builder.render.dockerfile import RenderedCell, render_all

MAX_JOBS = 256  # GitHub Actions' limit on the jobs of one strategy.matrix
RUNNER = "ubuntu-24.04"  # the hosted runner a row runs on (publish-cells.yml), unless the workflow names another
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", re.ASCII)


@dataclass(frozen=True)
class Runner:
    """Where a row runs: the runner's label and the disk it has free (the budget a row's peak must fit)."""

    label: str = RUNNER
    disk: int = sizes.DEFAULT_RUNNER_DISK


def runner(label: str | None, disk: str | None) -> Runner:
    """--runner and --runner-disk, checked: a label a workflow can put in runs-on, a size (sizes.parse_size)."""
    if label is not None and not _LABEL.fullmatch(label):
        raise usage_error("--runner", f"{label[:80]!r} is not a runner label: [A-Za-z0-9_.-], at most 100")
    return Runner(label or RUNNER, sizes.parse_size(disk) if disk is not None else sizes.DEFAULT_RUNNER_DISK)


HOSTED = Runner()  # the publish workflow's own runner, with its default budget


class Row(TypedDict):
    group: str  # the bake group (images/docker-bake.json), also the job's name and its record's name
    groups: str  # the bake groups the row publishes, space-separated: itself, or those of a packed row
    cells: str  # the image tags of the group, space-separated, each selectable with `builder publish --cell`
    images: int  # how many
    os: str
    platform: str
    python: str
    torch: str
    channel: str
    peak_disk: int  # bytes: the row's estimated peak disk on its runner (builder.publish.sizes)
    runner: str  # the runner label it asks for


def rows(cells: list[CellSpec], where: Runner = HOSTED) -> list[Row]:
    """One row per combination (or per part of one, by budget), in matrix order; every image (cells of one content
    are one) in exactly one row."""
    groups: dict[str, list[RenderedCell]] = {}
    for rendered in render_all(cells):
        groups.setdefault(group_of(rendered), []).append(rendered)
    return build_rows(groups, where=where)


def row(group: str, members: list[RenderedCell], name: str | None = None, label: str = RUNNER) -> Row:
    c = members[0].cell
    return {"group": name or group, "groups": group, "cells": " ".join(m.cell.tag for m in members),
            "images": len(members), "os": c.os, "platform": c.platform, "python": c.python, "torch": c.torch,
            "channel": c.channel, "peak_disk": sizes.peak_of([sizes.estimate(m) for m in members]), "runner": label}


def split(group: str, members: list[RenderedCell], where: Runner = HOSTED) -> list[Row]:
    """The combination as one row when its peak fits the budget, else its GPU families (a family's runtime and
    devel together) packed in order into as few rows as fit; an image that alone does not fit is an error naming
    it and the disk it needs."""
    estimates, budget = {m.cell.tag: sizes.estimate(m) for m in members}, where.disk
    if sizes.peak_of(list(estimates.values())) <= budget:
        return [row(group, members, label=where.label)]
    over = sorted((estimates[m.cell.tag].peak, m.cell.tag) for m in members if estimates[m.cell.tag].peak > budget)
    if over:
        need, tag = over[-1]
        more = f" (and {len(over) - 1} more of {group})" if len(over) > 1 else ""
        raise usage_error("--runner-disk", (
            f"{tag}{more} alone needs {sizes.gib(need)} of disk at its peak (estimated), more than the "
            f"{sizes.gib(budget)} runner {where.label} has: it needs a larger runner, one with at least "
            f"{-(-need // sizes.GIB)}G free (--runner LABEL --runner-disk {-(-need // sizes.GIB)}G; publish.yml's "
            "`runner` and `runner_disk` inputs)"))
    by_gfx: dict[str, list[RenderedCell]] = {}
    for m in members:
        by_gfx.setdefault(m.cell.gfx or "all", []).append(m)
    parts: list[list[RenderedCell]] = []
    for unit in by_gfx.values():  # a GPU family's runtime and devel images
        if parts and sizes.peak_of([estimates[m.cell.tag] for m in parts[-1] + unit]) <= budget:
            parts[-1] += unit
        else:
            parts.append(list(unit))
    return [row(group, part, f"{group}-part{k}-of-{len(parts)}", where.label) for k, part in enumerate(parts, start=1)]


def row_of(selected: list[Row]) -> dict[str, str]:
    """image tag -> the name of the row that publishes it."""
    return {tag: r["group"] for r in selected for tag in r["cells"].split()}


def matrix_json(selected: list[Row]) -> str:
    """One line, for `echo "groups=$(builder matrix --format github)" >> $GITHUB_OUTPUT` and fromJSON()."""
    if len(selected) > MAX_JOBS:
        raise usage_error("--format github", f"{len(selected)} combinations exceed GitHub's {MAX_JOBS} jobs per "
                                             "matrix: split them with --shard K/N")
    return json.dumps({"include": selected}, separators=(",", ":"))


def build_rows(groups: dict[str, list[RenderedCell]], limit: int = MAX_JOBS,
               where: Runner = HOSTED) -> list[Row]:
    """The rows of these combinations (group -> its images to build): one per combination (or per part of one
    whose peak exceeds the budget) while they fit in one matrix, else `limit` rows of several interleaved ones each
    (one job bakes them all), so a matrix of any size publishes."""
    single = [r for name, members in groups.items() for r in split(name, members, where)]
    if len(single) <= limit:
        return single
    packed = []
    for k in range(limit):
        part = single[k::limit]
        first = part[0]
        packed.append(Row(group=f"batch-{k + 1}-of-{limit}", groups=" ".join(dict.fromkeys(r["groups"] for r in part)),
                          cells=" ".join(r["cells"] for r in part), images=sum(r["images"] for r in part),
                          os=first["os"], platform=first["platform"], python=first["python"], torch=first["torch"],
                          channel=first["channel"], peak_disk=sum(r["peak_disk"] for r in part),
                          runner=first["runner"]))
    return packed
