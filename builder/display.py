"""What a person sees: stage lines, build logs, summaries and tables. It only listens and prints.

Every string that came from a file, an image or a registry goes through `safe` first: rich markup is
escaped and control characters (an escape sequence in a matrix's override reason) never reach the terminal.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from builder.matrix import Expansion
from builder.pipeline import Events
from builder.plan import plan_images
from builder.record import ImageReport
from builder.spec import CellSpec
from builder.validate import Check

# Piped output (CI logs, files) gets wide tables instead of rich's 80-column default.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
COLORS = {"published": "green", "validated": "green", "built": "green", "skipped": "cyan", "failed": "red",
          "would-build": "yellow", "would-skip": "cyan", "not-attempted": "yellow", "planned": "yellow"}
CHECK_COLORS = {"pass": "green", "fail": "red", "skip": "yellow", "warn": "magenta", "info": "cyan"}


def safe(text: object) -> str:
    """Text from outside, made printable: control characters shown as \\xNN, rich markup escaped."""
    return escape(CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", str(text)))


def error(message: str) -> None:
    err.print(f"[red]error:[/red] {safe(message)}")


def events(quiet: bool) -> Events:
    """Stage lines always; build log lines unless quiet."""
    def stage(tag: str, name: str) -> None:
        out.print(f"[bold]==> {safe(name)}[/bold] {safe(tag)}", soft_wrap=True)

    def line(tag: str, text: str) -> None:
        out.print(f"[dim]{safe(tag)} |[/dim] {safe(text)}", soft_wrap=True)

    return Events(stage, (lambda tag, text: None) if quiet else line)


# -- matrix --------------------------------------------------------------------------------------------

def cell_row(c: CellSpec) -> dict[str, Any]:
    return {**c.model_dump(exclude={"line", "explicit_tag"}), "python": c.python, "rocm": c.rocm,
            "image_tag": c.content_cell().tag}


def json_rows(expansion: Expansion, explain: bool) -> dict[str, Any] | list[dict[str, Any]]:
    cells = [cell_row(c) for c in expansion.cells]
    if not explain:
        return cells
    return {"cells": cells,
            "dropped": [{**cell_row(d.cell), "rule": d.rule, "reason": d.reason} for d in expansion.dropped],
            "overridden": [{"tag": d.cell.tag, "rule": d.rule, "reason": d.reason, "override": d.override}
                           for d in expansion.overridden]}


def print_json(data: object) -> None:
    out.print_json(json.dumps(data))


def print_cells(expansion: Expansion, matrix: object) -> None:
    images = len(plan_images(expansion.cells))
    table = Table(title=f"{len(expansion.cells)} cells ({images} images) from {safe(matrix)}")
    table.add_column("tag", no_wrap=True)
    for col in ("channel", "torch", "companions", "user"):
        table.add_column(col)
    for c in expansion.cells:
        companions = f"{c.torchvision or '-'} / {c.torchaudio or '-'}"
        table.add_row(safe(c.tag), c.channel, c.torch, companions, safe(c.user))
    out.print(table)
    for d in expansion.overridden:
        out.print(f"[yellow]override[/yellow] {safe(d.cell.tag)}: breaks {d.rule} ({safe(d.reason)}); built "
                  f"because: {safe(d.override or '')}", soft_wrap=True)


def print_dropped(expansion: Expansion) -> None:
    reasons: dict[str, list[str]] = {}
    for d in expansion.dropped:
        reasons.setdefault(d.cell.tag + f" ({d.cell.channel})", []).append(f"{d.rule}: {d.reason}")
    out.print(f"\n{len(reasons)} cells of the product dropped (by the matrix's excludes or the compatibility rules):")
    for tag, why in reasons.items():
        out.print(f"  [red]{safe(tag)}[/red]", soft_wrap=True)
        for line in why:
            out.print(f"      {safe(line)}", soft_wrap=True)


# -- runs ----------------------------------------------------------------------------------------------

def print_reports(reports: list[ImageReport], registry: str | None, dry_run: bool = False) -> None:
    """Failures first (with what to look at), then one row per image, then the counts."""
    for r in reports:
        _print_failure(r, registry)
    where = f"publish to {safe(registry)}" if registry else "build"
    table = Table(title=f"{'dry run: ' if dry_run else ''}{where}")
    table.add_column("image", no_wrap=True)
    for col in ("state", "tags", "immutable tag", "digest", "moved tags", "build s", "validate s"):
        table.add_column(col)
    for r in reports:
        table.add_row(safe(r.tag), f"[{COLORS.get(r.state, 'white')}]{r.state}[/]", str(len(r.tags)),
                      safe(r.immutable_tag), safe(r.digest or "-"), safe(" ".join(r.moved) or "-"),
                      _seconds(r.build_seconds), _seconds(r.validate_seconds))
    out.print(table)
    for r in reports:
        if r.pushed and r.digest:
            ref = f"{registry}/{r.repository}:{r.immutable_tag}"
            out.print(f"pushed {safe(ref)}@{r.digest}", soft_wrap=True)
    counts = {s: sum(r.state == s for r in reports) for s in ("published", "skipped", "failed")}
    if registry:
        out.print(f"{counts['published']} built, {counts['skipped']} unchanged, {counts['failed']} failed")


def _print_failure(r: ImageReport, registry: str | None) -> None:
    if r.failed_stage == "build":
        err.print(f"[red]build failed[/red] {safe(r.tag)}: {safe(r.failure)}")
        for line in r.log_tail[-15:]:
            err.print(f"    {safe(line)}")
    elif r.failed_stage == "validate":
        print_failed_checks(r.tag, r.validation)
    elif r.failed_stage in ("push", "registry"):
        err.print(f"[red]push failed[/red] {safe(registry)}/{safe(r.repository)} ({safe(r.tag)}): {safe(r.failure)}")


def print_failed_checks(tag: str, checks: list[Check]) -> None:
    err.print(f"[red]validation failed[/red] {safe(tag)}:")
    for c in checks:
        if c.status == "fail":
            err.print(f"    {safe(c.suite)}/{safe(c.name)}: {safe(c.detail)}")
            if c.fix:
                err.print(f"        fix: {safe(c.fix)}")


def print_checks(ref: str, checks: list[Check]) -> None:
    table = Table(title=f"validation of {safe(ref)}")
    for col in ("suite", "check", "status", "detail"):
        table.add_column(col)
    for c in checks:
        detail = c.detail + (f" (fix: {c.fix})" if c.fix else "")
        table.add_row(safe(c.suite), safe(c.name), f"[{CHECK_COLORS.get(c.status, 'white')}]{c.status}[/]",
                      safe(detail))
    out.print(table)
    failures = sum(c.status == "fail" for c in checks)
    out.print("[green]passed[/green]" if checks and not failures else f"[red]{failures} check(s) failed[/red]")


def _seconds(value: float | None) -> str:
    return f"{value:.1f}" if value is not None else "-"
