"""Running a list of image jobs for `build`, `publish` and `push`: the live view, the record, the summary table."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from rich.table import Table

from builder.buildkit.engine import connect
from builder.cli import console
from builder.cli.kit import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, Progress, terminates
from builder.cli.progress import RunView
from builder.core import safefs
from builder.core.text import safe
from builder.pipeline import jobs, lifecycle
from builder.publish.promote import Target
from builder.publish.record import ImageReport
from builder.registry.address import check_registry
from builder.validate.runner import Check

COLORS = {"published": "green", "validated": "green", "built": "green", "skipped": "cyan", "failed": "red",
          "would-build": "yellow", "would-skip": "cyan", "not-attempted": "yellow", "planned": "yellow"}


def target(registry: str, insecure: frozenset[str]) -> Target:
    """Where a run pushes (--registry, checked), spoken to over plain HTTP only if loopback or named insecure."""
    return Target.of(check_registry(registry), insecure=insecure)


def run(todo: list[jobs.Job], options: lifecycle.Options, progress: Progress, report_path: Path | None,
        registry: str | None) -> int:
    """Run the jobs, print the summary, and write the record whatever happens (interruptions included); the exit
    code. A record that cannot be written is refused before the run, or (a full disk) said after the summary: 2."""
    if report_path is not None:
        safefs.check_named(report_path, "the run record")
    client = connect()
    view = RunView([j.tag for j in todo], progress.value, console=console.out)
    with terminates(), view.running():
        reports, unwritten = lifecycle.run_and_record(client, todo, options, view.events(), report_path, registry)
    if progress == Progress.json:
        print(json.dumps({"event": "summary", "images": [r.as_json() for r in reports]}))
    else:
        rehearsal = "no push" if options.push is not None and options.push.no_push else ""
        print_reports(reports, registry, rehearsal, view.log_dir)
        if report_path is not None and unwritten is None:
            console.out.print(f"run record: {safe(report_path)}")
    if unwritten is not None:
        console.error(str(unwritten))
        return EXIT_BAD_INPUT
    return EXIT_FAILED if any(r.failed for r in reports) else EXIT_OK


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
    console.out.print(table)
    for r in reports:
        if r.digest and registry:
            ref = f"{registry}/{r.repository}:{r.immutable_tag}"
            verb = "pushed" if r.pushed else "already published:"
            console.out.print(f"{verb} {safe(ref)}@{r.digest}", soft_wrap=True)
        if r.moved:
            console.out.print(f"  {'would move' if rehearsal else 'moved'} {safe(' '.join(r.moved))}", soft_wrap=True)
    counts = {s: sum(r.state == s for r in reports) for s in ("published", "skipped", "failed", "validated",
                                                               "would-build", "would-skip")}
    if registry and rehearsal == "no push":
        console.out.print(f"{counts['validated']} built and validated, {counts['would-skip']} unchanged, "
                       f"{counts['failed']} failed; nothing pushed, no tag moved")
    elif registry and rehearsal:
        console.out.print(f"{counts['would-build']} would be built, {counts['would-skip']} unchanged; nothing built")
    elif registry:
        console.out.print(f"{counts['published']} built, {counts['skipped']} unchanged, {counts['failed']} failed")


def check_counts(checks: Sequence[Check]) -> str:
    """'12 passed, 1 warning' (or '-' when nothing was validated)."""
    if not checks:
        return "-"
    names = {"pass": "passed", "fail": "failed", "warn": "warning", "skip": "skipped"}
    counts = {status: sum(c.status == status for c in checks) for status in names}
    parts = [f"{n} {names[s]}{'s' if s == 'warn' and n > 1 else ''}" for s, n in counts.items() if n]
    return ", ".join(parts)


def _sizes(r: ImageReport) -> str:
    """Installed (unpacked, in a container), then what a pull downloads and what this run uploaded."""
    installed = console.gb(r.image_bytes)
    if not r.compressed_bytes:
        return installed
    pushed = "" if r.pushed_bytes is None else f", {console.gb(r.pushed_bytes) if r.pushed_bytes else '0 B'} pushed"
    return f"{installed} ({console.gb(r.compressed_bytes)} compressed{pushed})"


def _print_failure(r: ImageReport, registry: str | None, log_dir: Path | None) -> None:
    if r.failed_stage == "build":
        console.err.print(f"[red]build failed[/red] {safe(r.tag)}: {safe(r.failure)}")
        for line in r.log_tail[-15:]:
            console.err.print(f"    {safe(line)}")
        if log_dir is not None:
            console.err.print(f"    full log: {safe(log_dir / (r.tag + '.log'))}")
    elif r.failed_stage == "validate":
        console.print_failed_checks(r.tag, r.validation)
    elif r.failed_stage in ("push", "registry"):
        console.err.print(f"[red]push failed[/red] {safe(registry)}/{safe(r.repository)} ({safe(r.tag)}): "
                       f"{safe(r.failure)}")
