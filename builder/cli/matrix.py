"""`builder matrix`: the cells a matrix expands to (table, JSON or GitHub Actions rows); with --explain, the drops."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from builder.cli import console
from builder.cli.kit import MatchOpt, MatrixOpt, RunnerDiskOpt, RunnerOpt, handles_errors
from builder.core.errors import usage_error
from builder.core.spec import CellSpec
from builder.core.text import safe
from builder.matrix.expand import Expansion, expand_matrix
from builder.matrix.explain import family_gap_lines, family_gaps, line_verdicts
from builder.matrix.selection import plan_images, select, shard
from builder.publish import rows, runners


@handles_errors
def matrix_cmd(matrix: MatrixOpt = Path("matrix.yaml"),
               fmt: Annotated[str, typer.Option("--format", help="table, json or github")] = "table",
               explain: Annotated[bool, typer.Option(
                   "--explain", help="Also list every dropped cell with the rule that dropped it.")] = False,
               match: MatchOpt = None,
               shard_spec: Annotated[str | None, typer.Option(
                   "--shard", help="K/N: only the K-th of N interleaved slices of the rows (for github).")] = None,
               runner_disk: RunnerDiskOpt = None, runner: RunnerOpt = None,
               ) -> None:
    """List the cells the matrix expands to (after include/exclude and the compatibility rules)."""
    if fmt not in ("table", "json", "github"):
        raise usage_error("--format", f"unknown format {fmt!r}; use table, json or github")
    if shard_spec is not None and fmt != "github":
        raise usage_error("--shard", f"applies to --format github only (not {fmt})")
    for option, value in (("--runner-disk", runner_disk), ("--runner", runner)):
        if value is not None and fmt != "github":
            raise usage_error(option, f"applies to --format github only (not {fmt})")
    if explain and fmt == "github":
        raise usage_error("--explain", "applies to --format table or json (github rows list combinations, not drops)")
    # The pool is read (and a bad size or pool file refused) before the matrix is expanded.
    where = runners.resolve(matrix, runner, runner_disk) if fmt == "github" else runners.HOSTED
    expansion = expand_matrix(matrix)
    expansion.cells = select(expansion.cells, None, matrix, match)
    if fmt == "json":
        print_json(json_rows(expansion, explain))
    elif fmt == "github":
        print(rows.matrix_json(shard(rows.rows(expansion.cells, where), shard_spec)))
    else:
        print_cells(expansion, matrix)
        if explain:
            print_dropped(expansion)


def cell_row(c: CellSpec) -> dict[str, Any]:
    return {**c.model_dump(exclude={"line", "explicit_tag"}), "python": c.python, "rocm": c.rocm,
            "image_tag": c.content_cell().tag}


def json_rows(expansion: Expansion, explain: bool) -> dict[str, Any] | list[dict[str, Any]]:
    cells = [cell_row(c) for c in expansion.cells]
    if not explain:
        return cells
    return {"cells": cells,
            "lines": [{"channel": v.channel, "platform": v.platform, "cells": v.cells, "torch": v.kept,
                       "verdict": v.verdict} for v in line_verdicts(expansion)],
            "families_without_image": family_gaps(expansion)[1],
            "dropped": [{**cell_row(d.cell), "rule": d.rule, "reason": d.explained} for d in expansion.dropped],
            "overridden": [{"tag": d.cell.tag, "rule": d.rule, "reason": d.reason, "override": d.override}
                           for d in expansion.overridden]}


def print_json(data: object) -> None:
    console.out.print_json(json.dumps(data))


def print_cells(expansion: Expansion, matrix: object) -> None:
    images = len(plan_images(expansion.cells))
    table = Table(title=f"{len(expansion.cells)} cells ({images} images) from {safe(matrix)}", title_justify="left")
    table.add_column("tag", overflow="fold", ratio=1, min_width=24)  # folds at 80 columns; never squeezes the rest
    for col in ("channel", "torch", "companions", "user"):
        table.add_column(col, no_wrap=True)
    for c in expansion.cells:
        companions = f"{c.torchvision or '-'} / {c.torchaudio or '-'}"
        table.add_row(safe(c.tag), c.channel, c.torch, companions, safe(c.user))
    console.out.print(table)
    for d in expansion.overridden:
        console.out.print(f"[yellow]override[/yellow] {safe(d.cell.tag)}: breaks {d.rule} ({safe(d.reason)}); built "
                       f"because: {safe(d.override or '')}", soft_wrap=True)


def print_dropped(expansion: Expansion) -> None:
    """Each distinct reason once, with how many cells it dropped and an example, then a count per rule:
    a product of thousands of cells reads in a screen, where a line per cell did not."""
    out = console.out
    out.print("\nROCm lines of the product, kept or dropped:")
    for v in line_verdicts(expansion):
        if v.cells:
            out.print(f"  {safe(v.channel)} {safe(v.platform)}: {safe(v.verdict)}", soft_wrap=True)
            continue
        out.print(f"  {safe(v.channel)} {safe(v.platform)}: dropped", soft_wrap=True)
        for reason in v.why:
            out.print(f"      {safe(reason)}", soft_wrap=True)
    for text in family_gap_lines(expansion):
        out.print(safe(text), soft_wrap=True)
    by_reason: dict[tuple[str, str], list[str]] = {}
    for d in expansion.dropped:
        by_reason.setdefault((d.rule, d.explained), []).append(d.cell.tag)
    cells = {d.cell.tag + d.cell.channel for d in expansion.dropped}
    out.print(f"\n{len(cells)} cells of the product dropped (by the matrix's excludes or the compatibility rules):")
    for (rule, reason), tags in sorted(by_reason.items(), key=lambda item: (-len(item[1]), item[0])):
        more = f" and {len(tags) - 1} more" if len(tags) > 1 else ""
        out.print(f"  [red]{safe(rule)}[/red]: {safe(reason)}", soft_wrap=True)
        out.print(f"      {len(tags)} {'cell' if len(tags) == 1 else 'cells'}: {safe(tags[0])}{more}", soft_wrap=True)
    per_rule: dict[str, set[str]] = {}
    for d in expansion.dropped:
        per_rule.setdefault(d.rule, set()).add(d.cell.tag + d.cell.channel)
    summary = ", ".join(f"{rule} {len(tags)}" for rule, tags in sorted(per_rule.items(), key=lambda i: -len(i[1])))
    out.print(f"cells dropped per rule (a cell may break several): {summary}", soft_wrap=True)
