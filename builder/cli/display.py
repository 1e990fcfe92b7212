"""What a person sees: stage lines, build logs, summaries and tables. It only listens and prints.

Every string that came from a file, an image or a registry goes through `safe` first: rich markup is
escaped and control characters (an escape sequence in a matrix's override reason) never reach the terminal.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.table import Table

from builder.build.prune import Pruned
from builder.core.spec import CellSpec
from builder.core.text import safe
from builder.matrix.expand import Expansion
from builder.matrix.explain import family_gap_lines, family_gaps, line_verdicts
from builder.matrix.selection import plan_images
from builder.publish.record import ImageReport
from builder.validate.runner import Check

if TYPE_CHECKING:
    from builder.audit.diff import Diff, Inventory

# Piped output (CI logs, files) gets wide tables instead of rich's 80-column default.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)
COLORS = {"published": "green", "validated": "green", "built": "green", "skipped": "cyan", "failed": "red",
          "would-build": "yellow", "would-skip": "cyan", "not-attempted": "yellow", "planned": "yellow"}
CHECK_COLORS = {"pass": "green", "fail": "red", "skip": "yellow", "warn": "magenta", "info": "cyan"}



def error(message: str) -> None:
    err.print(f"[red]error:[/red] {safe(message)}")


# -- matrix --------------------------------------------------------------------------------------------

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
            "dropped": [{**cell_row(d.cell), "rule": d.rule, "reason": d.reason} for d in expansion.dropped],
            "overridden": [{"tag": d.cell.tag, "rule": d.rule, "reason": d.reason, "override": d.override}
                           for d in expansion.overridden]}


def print_json(data: object) -> None:
    out.print_json(json.dumps(data))


def print_cells(expansion: Expansion, matrix: object) -> None:
    images = len(plan_images(expansion.cells))
    table = Table(title=f"{len(expansion.cells)} cells ({images} images) from {safe(matrix)}", title_justify="left")
    table.add_column("tag", overflow="fold", ratio=1, min_width=24)  # folds at 80 columns; never squeezes the rest
    for col in ("channel", "torch", "companions", "user"):
        table.add_column(col, no_wrap=True)
    for c in expansion.cells:
        companions = f"{c.torchvision or '-'} / {c.torchaudio or '-'}"
        table.add_row(safe(c.tag), c.channel, c.torch, companions, safe(c.user))
    out.print(table)
    for d in expansion.overridden:
        out.print(f"[yellow]override[/yellow] {safe(d.cell.tag)}: breaks {d.rule} ({safe(d.reason)}); built "
                  f"because: {safe(d.override or '')}", soft_wrap=True)


def print_dropped(expansion: Expansion) -> None:
    """Each distinct reason once, with how many cells it dropped and an example, then a count per rule:
    a product of thousands of cells reads in a screen, where a line per cell did not."""
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
        by_reason.setdefault((d.rule, d.reason), []).append(d.cell.tag)
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


# -- runs ----------------------------------------------------------------------------------------------

def print_reports(reports: list[ImageReport], registry: str | None, rehearsal: str = "",
                  log_dir: Path | None = None) -> None:
    """Failures first (with what to look at), then one row per image, then where things went.

    rehearsal: "plan" or "no push" for a run that writes nothing to the registry ("" for a real one).
    """
    for r in reports:
        _print_failure(r, registry, log_dir)
    where = f"publish to {safe(registry)}" if registry else "build"
    table = Table(title=f"{rehearsal + ': ' if rehearsal else ''}{where}", title_justify="left")
    table.add_column("image", overflow="fold", ratio=3)
    table.add_column("state", no_wrap=True)
    table.add_column("size", no_wrap=True)
    table.add_column("checks", overflow="fold", ratio=1)
    table.add_column("time", no_wrap=True, justify="right")
    for r in reports:
        state = f"[{COLORS.get(r.state, 'white')}]{r.state}[/]"
        table.add_row(safe(r.tag), state, _sizes(r), check_counts(r.validation), f"{r.seconds:.0f}s")
    out.print(table)
    for r in reports:
        if r.digest and registry:
            ref = f"{registry}/{r.repository}:{r.immutable_tag}"
            verb = "pushed" if r.pushed else "already published:"
            out.print(f"{verb} {safe(ref)}@{r.digest}", soft_wrap=True)
        if r.moved:
            out.print(f"  {'would move' if rehearsal else 'moved'} {safe(' '.join(r.moved))}", soft_wrap=True)
    counts = {s: sum(r.state == s for r in reports) for s in ("published", "skipped", "failed", "validated",
                                                               "would-build", "would-skip")}
    if registry and rehearsal == "no push":
        out.print(f"{counts['validated']} built and validated, {counts['would-skip']} unchanged, "
                  f"{counts['failed']} failed; nothing pushed, no tag moved")
    elif registry and rehearsal:
        out.print(f"{counts['would-build']} would be built, {counts['would-skip']} unchanged; nothing built")
    elif registry:
        out.print(f"{counts['published']} built, {counts['skipped']} unchanged, {counts['failed']} failed")


def check_counts(checks: list[Check]) -> str:
    """'12 passed, 1 warning' (or '-' when nothing was validated)."""
    if not checks:
        return "-"
    names = {"pass": "passed", "fail": "failed", "warn": "warning", "skip": "skipped"}
    counts = {status: sum(c.status == status for c in checks) for status in names}
    parts = [f"{n} {names[s]}{'s' if s == 'warn' and n > 1 else ''}" for s, n in counts.items() if n]
    return ", ".join(parts)


def _sizes(r: ImageReport) -> str:
    installed = _gb(r.image_bytes)
    return f"{installed} ({_gb(r.compressed_bytes)} pushed)" if r.compressed_bytes else installed


def _gb(n: int | None) -> str:
    if not n:
        return "-"
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.0f} MB"


def _print_failure(r: ImageReport, registry: str | None, log_dir: Path | None) -> None:
    if r.failed_stage == "build":
        err.print(f"[red]build failed[/red] {safe(r.tag)}: {safe(r.failure)}")
        for line in r.log_tail[-15:]:
            err.print(f"    {safe(line)}")
        if log_dir is not None:
            err.print(f"    full log: {safe(log_dir / (r.tag + '.log'))}")
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




# -- which -----------------------------------------------------------------------------------------------

WHICH_SOURCES = {"kfd": "KFD topology, /sys/class/kfd", "pci": "PCI IDs: amdgpu is not loaded",
                 "--gfx": "given with --gfx"}


def print_which(data: dict[str, Any], as_json: bool) -> None:
    """`builder which`: the JSON as is, or the same facts for a person (docker run lines never wrapped)."""
    if as_json:
        print(json.dumps(data, indent=2))
        return
    gpus = data["gpus"]
    notes = list(data["notes"])
    if not gpus:
        out.print(f"[red]{safe(notes.pop(0))}[/red]", soft_wrap=True)
        if data["other_gpus"]:
            out.print("Other GPUs on this host (these images are for AMD GPUs with ROCm):")
            for o in data["other_gpus"]:
                out.print(f"  {safe(o['pci'])}  {safe(o['vendor'])} {safe(o['device_id'])}")
        cpu = data["cpu_image"]
        if cpu:
            out.print(f"torch on the CPU: {safe(cpu['tag'])}")
            out.print(f"  {safe(cpu['docker_run'])}", soft_wrap=True)
    else:
        out.print(f"GPUs ({safe(WHICH_SOURCES.get(data['source'], data['source']))}):")
        for row in _gpu_rows(gpus):
            out.print(f"  {row}", soft_wrap=True)
    rec = data["recommended"]
    if rec:
        image = rec["image"]
        out.print(f"\n[bold]Use {safe(image['tag'])}[/bold]", soft_wrap=True)
        out.print(f"  for {safe(rec['for'])}: {safe(rec['target'])}, family {safe(rec['family'] or '-')}",
                  soft_wrap=True)
        out.print(f"  {_image_text(image)}", soft_wrap=True)
        out.print(f"  {safe(rec['docker_run'])}", soft_wrap=True)
        if rec["alternatives"]:
            out.print(f"Other images for {safe(rec['target'])}:")
            for alt in rec["alternatives"]:
                out.print(f"  {safe(alt['tag'])}", soft_wrap=True)
        choices = rec["choices"]
        out.print(f"  narrow with --rocm {'|'.join(choices['rocm'])}, --os {'|'.join(choices['os'])}, "
                  f"--flavor {'|'.join(choices['flavor'])}", soft_wrap=True)
    for miss in data["unmatched"]:
        out.print(f"\n[yellow]No image:[/yellow] {safe(miss['message'])}", soft_wrap=True)
        override = miss["override"]
        if override:
            out.print(f"  HSA_OVERRIDE_GFX_VERSION={safe(override['value'])} would make the runtime treat it as "
                      f"{safe(override['poses_as'])}: {safe(override['risk'])}", soft_wrap=True)
            if override["docker_run"]:
                out.print(f"  at your own risk: {safe(override['docker_run'])}", soft_wrap=True)
            else:
                out.print(f"  but no image carries {safe(override['poses_as'])} either", soft_wrap=True)
    if notes:
        out.print("\nNotes:")
        for note in notes:
            out.print(f"  - {safe(note)}", soft_wrap=True)


def _gpu_rows(gpus: list[dict[str, Any]]) -> list[str]:
    """One row per run of alike GPUs: 'HIP 0-7  8 x AMD Instinct MI300X  gfx942  gfx94X-dcgpu  dGPU'."""
    from builder.which import span

    runs: list[list[dict[str, Any]]] = []
    for g in gpus:
        if runs and all(runs[-1][0][k] == g[k] for k in ("name", "target", "igpu", "supported")):
            runs[-1].append(g)
        else:
            runs.append([g])
    rows = []
    for run in runs:
        g, indices = run[0], [x["index"] for x in run if x["index"] is not None]
        where = f"HIP {span(indices)}" if len(indices) == len(run) else "-"
        name = f"{len(run)} x {g['name']}" if len(run) > 1 else g["name"]
        pci = f"  PCI {g['pci']}" if len(run) == 1 and g["pci"] else ""
        status = "" if g["supported"] else "  [yellow]no image[/yellow]"
        rows.append(f"{safe(where):9} {safe(name)}  {safe(g['target'] or 'gfx?')}  family "
                    f"{safe(g['family'] or '-')}  {'iGPU' if g['igpu'] else 'dGPU'}{safe(pci)}{status}")
    return rows


def _image_text(image: dict[str, Any]) -> str:
    wheels = ("pytorch.org wheels with kernels for every target" if image["gfx"] == "all" else
              f"{image['channel']} wheels with kernels for {image['gfx']} only")
    return safe(f"ROCm {image['rocm']}, torch {image['torch']} (Python {image['python']}), {image['os']}, "
                f"{image['flavor']}; {wheels}")


def print_diff(a: Inventory, b: Inventory, found: Diff) -> None:
    """builder diff: one row per package that changed between two images (builder.audit.diff Inventory, Diff)."""
    for side, inv in (("A", a), ("B", b)):
        ref = str(inv.ref) if "@" in str(inv.ref) else f"{inv.ref}@{inv.digest}"
        out.print(f"{side}: {safe(ref)} ({len(inv.packages)} packages)", soft_wrap=True)
    if not found.changes:
        out.print("no package changed")
        return
    table = Table(title_justify="left")
    for column in ("", "kind", "package", "A", "B"):
        table.add_column(column, overflow="fold")
    marks = {"added": "[green]+[/]", "removed": "[red]-[/]", "changed": "[yellow]~[/]"}
    for c in found.changes:
        table.add_row(marks[c.kind], "os" if c.ecosystem == "deb" else "python", safe(c.name), safe(c.before or "-"),
                      safe(c.after or "-"))
    out.print(table)
    out.print(", ".join(f"{len(found.of(k))} {k}" for k in ("added", "removed", "changed")))


def pruned(result: Pruned, dry_run: bool) -> None:
    """What `builder prune` removed (or would remove), and what the engine refused to."""
    verb = "would remove" if dry_run else "removed"
    for name in result.removed:
        out.print(f"{verb} {safe(name.ref)}  ({_gb(name.size)})")
    for name, why in result.kept:
        err.print(f"[yellow]kept[/yellow] {safe(name.ref)}: {safe(why)}")
    if not result.removed and not result.kept:
        out.print("nothing to prune: every local content name is the current build of its tag, or in use")
    elif not dry_run:
        freed = _gb(result.deleted_bytes) if result.deleted_bytes else "nothing"
        out.print(f"{len(result.removed)} superseded names removed; images deleted: {freed} (their size, counting "
                  "layers shared with images that stay)")
