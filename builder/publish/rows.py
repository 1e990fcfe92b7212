"""Cells -> the rows of a GitHub Actions `strategy.matrix`: one job per combination (bake group), within GitHub's limit.

A combination's images (runtime and devel of every family over one OS, Python, ROCm line and torch) are the
targets of one bake group. One job publishes them all with one `builder publish --cell A --cell B ...`, which
bakes them in one bake, so the stages they share (OS base, torch, each runtime under its devel, every family
over one torch stage) are built, stored and pushed once. The publish workflows read these rows as
`${{ matrix.<key> }}`; tests/publish/test_rows.py checks that every key a workflow reads is in every row.

Each row runs on the smallest runner of the pool (builder.publish.runners: runners.yaml beside the matrix, or
`--runner-disk`) whose disk holds its estimated peak (builder.publish.sizes: its largest wave's). A combination no
runner of the pool holds whole is split across rows by GPU family (a devel image with its runtime family): each
row names the same bake group, and the stage they share (torch) is built once by the `stages` job into the
registry cache, which every part imports. An image no runner holds is a plan error naming the disk it needs.
`peak_disk` is each row's estimated peak; `runner` the label it runs on.

Pure: it renders in memory (render_all) to learn the groups, and runs nothing.
"""

from __future__ import annotations

import json
from typing import TypedDict

from builder.core.errors import usage_error
from builder.core.spec import CellSpec
from builder.publish import runners, sizes
from builder.render.bakefile import group_of
from builder.render.dockerfile import RenderedCell, render_all

MAX_JOBS = 256  # GitHub Actions' limit on the jobs of one strategy.matrix
Runner = runners.Runner
Pool = runners.Pool
HOSTED = runners.HOSTED  # the standard hosted runner alone


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


def rows(cells: list[CellSpec], where: Pool | Runner = HOSTED) -> list[Row]:
    """One row per combination (or per part of one, where no runner holds it whole), in matrix order; every image
    (cells of one content are one) in exactly one row."""
    groups: dict[str, list[RenderedCell]] = {}
    for rendered in render_all(cells):
        groups.setdefault(group_of(rendered), []).append(rendered)
    return build_rows(groups, where=where)


def row(group: str, members: list[RenderedCell], pool: Pool, name: str | None = None) -> Row:
    """The row of these images, on the smallest runner of the pool that holds its peak (the caller made sure one
    does)."""
    c, peak = members[0].cell, sizes.peak_of([sizes.estimate(m) for m in members])
    runner = pool.fitting(peak)
    assert runner is not None, f"{name or group}: {peak} bytes, over every runner"
    return {"group": name or group, "groups": group, "cells": " ".join(m.cell.tag for m in members),
            "images": len(members), "os": c.os, "platform": c.platform, "python": c.python, "torch": c.torch,
            "channel": c.channel, "peak_disk": peak, "runner": runner.label}


def split(group: str, members: list[RenderedCell], where: Pool | Runner = HOSTED) -> list[Row]:
    """The combination as one row on the smallest runner that holds it whole; only where none does, its GPU
    families (a family's runtime and devel together, or each alone where the pair fits no runner) packed in order
    into as few rows as the largest runner holds, each on the smallest that holds it. An image no runner holds
    alone is an error naming it and the disk it needs."""
    pool = runners.pool_of(where)
    estimates = {m.cell.tag: sizes.estimate(m) for m in members}

    def peak(images: list[RenderedCell]) -> int:
        return sizes.peak_of([estimates[m.cell.tag] for m in images])

    if pool.fitting(peak(members)) is not None:
        return [row(group, members, pool)]
    budget = pool.largest.disk
    over = sorted((estimates[m.cell.tag].peak, m.cell.tag) for m in members if estimates[m.cell.tag].peak > budget)
    if over:
        need, tag = over[-1]
        more = f" (and {len(over) - 1} more of {group})" if len(over) > 1 else ""
        size = f"{-(-need // sizes.GIB)}G"
        raise pool.error(
            f"{tag}{more} alone needs {sizes.gib(need)} of disk at its peak (estimated), more than every runner of "
            f"the pool has (the largest: {pool.largest.label}, {sizes.gib(budget)}): it needs a larger runner, one "
            f"with at least {size} free (add it to {runners.FILE} beside the matrix, or --runner LABEL "
            f"--runner-disk {size}; publish.yml's `runner` and `runner_disk` inputs)")
    by_gfx: dict[str, list[RenderedCell]] = {}
    for m in members:
        by_gfx.setdefault(m.cell.gfx or "all", []).append(m)
    units = [u for unit in by_gfx.values() for u in ([unit] if peak(unit) <= budget else [[m] for m in unit])]
    parts: list[list[RenderedCell]] = []
    for unit in units:
        if parts and peak(parts[-1] + unit) <= budget:
            parts[-1] += unit
        else:
            parts.append(list(unit))
    return [row(group, part, pool, f"{group}-part{k}-of-{len(parts)}") for k, part in enumerate(parts, start=1)]


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
               where: Pool | Runner = HOSTED) -> list[Row]:
    """The rows of these combinations (group -> its images to build): one per combination (or per part of one no
    runner holds whole) while they fit in one matrix, else `limit` batches of several each (one job bakes them
    all, so a matrix of any size publishes), each on the smallest runner that holds the sum of its rows' peaks."""
    pool = runners.pool_of(where)
    single = [r for name, members in groups.items() for r in split(name, members, pool)]
    if len(single) <= limit:
        return single
    return [batch(part, f"batch-{k}-of-{limit}", pool) for k, part in enumerate(pack(single, limit), start=1)]


def pack(single: list[Row], limit: int) -> list[list[Row]]:
    """The rows in `limit` batches, the largest peaks first each to the batch with the least so far (the largest
    batch as small as this greedy rule makes it); each batch keeps the rows' matrix order."""
    batches: list[list[int]] = [[] for _ in range(limit)]
    totals = [0] * limit
    for i in sorted(range(len(single)), key=lambda i: -single[i]["peak_disk"]):
        k = min(range(limit), key=lambda k: (totals[k], k))
        batches[k].append(i)
        totals[k] += single[i]["peak_disk"]
    return [[single[i] for i in sorted(b)] for b in batches if b]


def batch(part: list[Row], name: str, pool: Pool) -> Row:
    """Several rows as one job: its peak the sum of theirs (a bake of several combinations holds them together)."""
    first, peak = part[0], sum(r["peak_disk"] for r in part)
    runner = pool.fitting(peak)
    if runner is None:
        raise pool.error(f"{name} ({' '.join(r['group'] for r in part)}) needs {sizes.gib(peak)} at its peak, more "
                         f"than every runner of the pool ({pool.largest.label}: {sizes.gib(pool.largest.disk)}): "
                         "fewer rows per job with --shard K/N, or a larger runner")
    return Row(group=name, groups=" ".join(dict.fromkeys(g for r in part for g in r["groups"].split())),
               cells=" ".join(r["cells"] for r in part), images=sum(r["images"] for r in part), os=first["os"],
               platform=first["platform"], python=first["python"], torch=first["torch"], channel=first["channel"],
               peak_disk=peak, runner=runner.label)
