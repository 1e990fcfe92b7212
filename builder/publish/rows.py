"""Cells -> the rows of a GitHub Actions `strategy.matrix`: one job per combination (bake group), within GitHub's limit.

A combination's images (runtime and devel of every family over one OS, Python, ROCm line and torch) are the
targets of one bake group. One job publishes them all with one `builder publish --cell A --cell B ...`, which
bakes them in one bake, so the stages they share (OS base, torch, each runtime under its devel, every family
over one torch stage) are built, stored and pushed once. The publish workflows read these rows as
`${{ matrix.<key> }}`; tests/publish/test_rows.py checks that every key a workflow reads is in every row.

Pure: it renders in memory (render_all) to learn the groups, and runs nothing.
"""

from __future__ import annotations

import json
from typing import TypedDict

from builder.core.errors import usage_error
from builder.core.spec import CellSpec
from builder.render.bakefile import group_of
from builder.render.dockerfile import RenderedCell, render_all

MAX_JOBS = 256  # GitHub Actions' limit on the jobs of one strategy.matrix


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


def rows(cells: list[CellSpec]) -> list[Row]:
    """One row per combination, in matrix order; every image (cells of one content are one) in exactly one row."""
    groups: dict[str, list[RenderedCell]] = {}
    for rendered in render_all(cells):
        groups.setdefault(group_of(rendered), []).append(rendered)
    return [row(name, members) for name, members in groups.items()]


def row(group: str, members: list[RenderedCell]) -> Row:
    c = members[0].cell
    return {"group": group, "groups": group, "cells": " ".join(m.cell.tag for m in members), "images": len(members),
            "os": c.os, "platform": c.platform, "python": c.python, "torch": c.torch, "channel": c.channel}


def matrix_json(selected: list[Row]) -> str:
    """One line, for `echo "groups=$(builder matrix --format github)" >> $GITHUB_OUTPUT` and fromJSON()."""
    if len(selected) > MAX_JOBS:
        raise usage_error("--format github", f"{len(selected)} combinations exceed GitHub's {MAX_JOBS} jobs per "
                                             "matrix: split them with --shard K/N")
    return json.dumps({"include": selected}, separators=(",", ":"))


def build_rows(groups: dict[str, list[RenderedCell]], limit: int = MAX_JOBS) -> list[Row]:
    """The rows of these combinations (group -> its images to build): one per combination while they fit in one
    matrix, else `limit` rows of several interleaved combinations each (one job bakes them all), so a matrix of
    any size publishes."""
    single = [row(name, members) for name, members in groups.items()]
    if len(single) <= limit:
        return single
    packed = []
    for k in range(limit):
        part = single[k::limit]
        first = part[0]
        packed.append(Row(group=f"batch-{k + 1}-of-{limit}", groups=" ".join(r["group"] for r in part),
                          cells=" ".join(r["cells"] for r in part), images=sum(r["images"] for r in part),
                          os=first["os"], platform=first["platform"], python=first["python"], torch=first["torch"],
                          channel=first["channel"]))
    return packed
