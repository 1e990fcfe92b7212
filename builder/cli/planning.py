"""`builder plan`: the registry-aware plan printed as a table, JSON or the workflow's rows; no engine, no build.

`--format github` prints the rows (the shape `builder matrix --format github` prints) of only the combinations with
at least one image to build; the plan job of publish.yml starts one publish job per row, none when there is none.
`--move-tags` moves the tags of published images that need no build, registry-side by digest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from builder.buildkit.export import Cache
from builder.cli import console, flags, runs
from builder.cli.kit import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    InsecureOpt,
    RecordOpt,
    RegistryOpt,
    RunnerDiskOpt,
    RunnerOpt,
    handles_errors,
    needs_registry,
)
from builder.core import safefs
from builder.core.errors import usage_error
from builder.core.text import safe
from builder.pipeline import jobs, lifecycle, stagewave
from builder.publish import planner, record, rows, runners
from builder.publish.promote import Target
from builder.registry.address import check_insecure
from builder.render.dockerfile import RenderedCell

FORMATS = ("text", "json", "github")


@handles_errors
@flags.grouped
def plan(selection: flags.Selection, registry: RegistryOpt = None, insecure: InsecureOpt = None,
         record_path: RecordOpt = Path("publish-record.json"), cache_registry: flags.CacheRegistryOpt = None,
         fmt: Annotated[str, typer.Option("--format", metavar="text|json|github", help=(
             "A table (text), every image with its action and why (json), or the workflow's rows of the "
             "combinations with an image to build (github)."))] = "text",
         move_tags: Annotated[bool, typer.Option("--move-tags", help=(
             "Move the tags of published images that point elsewhere, registry-side by digest (no engine, no "
             "build)."))] = False,
         runner_disk: RunnerDiskOpt = None, runner: RunnerOpt = None,
         ) -> None:
    """Ask the registry what `publish` would build, skip and re-tag; build nothing, push nothing."""
    insecure_hosts = check_insecure(insecure)
    check_format(fmt)
    checked = needs_registry(registry)
    where = runners.resolve(selection.matrix, runner, runner_disk)
    todo = selection.jobs()
    raise typer.Exit(run_plan(todo, runs.target(checked, insecure_hosts), fmt, move_tags, record_path, checked,
                              where, flags.cache(cache_registry, insecure_hosts)))


def check_format(fmt: str) -> None:
    """A bad --format is refused before any work."""
    if fmt not in FORMATS:
        raise usage_error("--format", f"unknown format {fmt!r}; use {', '.join(FORMATS)}")


def run_plan(todo: list[jobs.Job], target: Target, fmt: str, move_tags: bool, record_path: Path | None,
             registry: str, where: rows.Pool | rows.Runner = rows.HOSTED, cache: Cache | None = None) -> int:
    """Plan (and with move_tags, move the tags that need no build), print it, write the record; exit 1 when the
    registry could not say for some image, 2 when the record cannot be written (said after the plan). With a
    cache registry, the record also lists the shared stages the rows to build need that it does not hold yet
    (`shared_stages`: publish.yml starts its `stages` job only for those)."""
    if record_path is not None:
        safefs.check_named(record_path, "the run record")
    decisions = planner.plan(target, todo)
    if move_tags:
        planner.move_tags(target, decisions)
    reports = lifecycle.plan_records(decisions, moved=move_tags)
    unwritten = None
    if record_path is not None:
        try:
            record.write(record_path, reports, registry, True, _stages(decisions, cache))
        except safefs.OutputError as exc:
            unwritten = exc
    failed = [d for d in decisions if d.action == "error"]
    for d in failed:
        console.err.print(f"[red]plan failed[/red] {safe(d.job.tag)}: {safe(d.reason)}", soft_wrap=True)
    if fmt == "github":
        if not failed:  # an image to build that no row of the runner holds: exit 2 (after the record is written)
            print(github(decisions, where))
    elif fmt == "json":
        print(json.dumps({"registry": registry, "images": [d.as_json() for d in decisions],
                          "counts": counts(decisions)}, indent=2))
    else:
        runs.print_reports(reports, registry, "" if move_tags else "plan")
        moving = sum(d.action == "move-tags" for d in decisions)
        console.out.print(f"plan: {counts(decisions)['build']} to build, {moving} to re-tag"
                       f"{' (moved)' if move_tags else ''}, {counts(decisions)['skip']} unchanged")
    if unwritten is not None:
        console.error(str(unwritten))
        return EXIT_BAD_INPUT
    return EXIT_FAILED if failed else EXIT_OK


def counts(decisions: list[planner.Decision[jobs.Job]]) -> dict[str, int]:
    return {a: sum(d.action == a for d in decisions) for a in ("build", "move-tags", "skip", "error")}


def _groups(todo: list[jobs.Job]) -> dict[str, list[RenderedCell]]:
    groups: dict[str, list[RenderedCell]] = {}
    for job in todo:
        if job.rendered is not None:
            groups.setdefault(job.combination, []).append(job.rendered)
    return groups


def row_of(todo: list[jobs.Job], where: rows.Pool | rows.Runner) -> dict[str, str]:
    """image tag -> its row, for `builder stages`: a stage that images of two rows share is built once."""
    return rows.row_of(rows.build_rows(_groups(todo), where=where))


def _stages(decisions: list[planner.Decision[jobs.Job]], cache: Cache | None) -> dict[str, object] | None:
    if cache is None:
        return None
    missing = stagewave.to_build([r for rs in _to_build(decisions).values() for r in rs], cache)
    return {"shared_stages": {"cache": cache.ref, "to_build": [s.key for s in missing]}}


def _to_build(decisions: list[planner.Decision[jobs.Job]]) -> dict[str, list[RenderedCell]]:
    """Every image (rendered) of each combination with at least one image to build."""
    groups: dict[str, list[planner.Decision[jobs.Job]]] = {}
    for d in decisions:
        groups.setdefault(d.job.combination, []).append(d)
    return {name: [d.job.rendered for d in members if d.job.rendered is not None]
            for name, members in groups.items() if any(d.action == "build" for d in members)}


def github(decisions: list[planner.Decision[jobs.Job]], where: rows.Pool | rows.Runner = rows.HOSTED) -> str:
    """The rows (all their images, as `builder matrix --format github` lists them) of the combinations with at
    least one image to build; the publish job skips the others again by content hash."""
    return json.dumps({"include": rows.build_rows(_to_build(decisions), where=where)}, separators=(",", ":"))
