"""The `builder` command: one subcommand per stage, exit 0 on success, 1 when an image failed, 2 on bad input."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from builder import baseimage, context, pipeline, wheelhouse
from builder.dockerapi import EngineUnavailable, connect, run_captured
from builder.errors import InputError, Problem
from builder.matrix import Expansion, expand_matrix, load_matrix
from builder.plan import ImagePlan, plan_images
from builder.render import CELL_FILE, WheelSource, render_cell
from builder.spec import CellSpec
from builder.validate import ValidationResult, validate_image

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)
# Piped output (CI logs, files) gets wide tables instead of rich's 80-column default.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, soft_wrap=True)

P = ParamSpec("P")
R = TypeVar("R")

MatrixOpt = Annotated[Path, typer.Option("--matrix", "-m", help="Matrix file (YAML).")]
WheelhouseOpt = Annotated[Path | None, typer.Option(
    "--wheelhouse", help="Install wheels from this directory (--no-index) instead of the cells' index URLs.",
    exists=True, file_okay=False)]
CellOpt = Annotated[list[str] | None, typer.Option("--cell", help="Only cells with this tag (repeatable).")]
RegistryOpt = Annotated[str | None, typer.Option(
    "--registry", envvar="RIF_REGISTRY",
    help="Push target REGISTRY/NAMESPACE (env RIF_REGISTRY); credentials from RIF_REGISTRY_USER/PASSWORD.")]


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Bad input exits 2 with every problem listed; a missing engine exits 2 with what to start."""
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            for problem in exc.problems:
                err.print(f"[red]error:[/red] {escape(str(problem))}")
            raise typer.Exit(EXIT_BAD_INPUT) from exc
        except (EngineUnavailable, NotImplementedError) as exc:
            err.print(f"[red]error:[/red] {escape(str(exc))}")
            raise typer.Exit(EXIT_BAD_INPUT) from exc
    return wrapper


def select(cells: list[CellSpec], tags: list[str] | None, matrix: Path, match: str | None = None) -> list[CellSpec]:
    """Cells named by tag (a cell's own tag or the tag of the image it belongs to) and/or matching a regex."""
    if match is not None:
        try:
            pattern = re.compile(match)
        except re.error as exc:
            raise InputError([Problem(Path("(command line)"), None, "--match", f"bad regex: {exc}")]) from exc
        cells = [c for c in cells if pattern.search(c.tag)]
    if not tags:
        return cells
    known = {c.tag for c in cells} | {c.content_cell().tag for c in cells}
    unknown = sorted(set(tags) - known)
    if unknown:
        raise InputError([Problem(matrix, None, "--cell", f"no cell has tag {t!r}") for t in unknown])
    return [c for c in cells if c.tag in tags or c.content_cell().tag in tags]


GITHUB_MAX_JOBS = 256  # GitHub Actions' limit on the jobs of one strategy.matrix

MatchOpt = Annotated[str | None, typer.Option("--match", help="Only cells whose tag matches this regex.")]


@app.command("matrix")
@handles_errors
def matrix_cmd(matrix: MatrixOpt = Path("matrix.yaml"),
               fmt: Annotated[str, typer.Option("--format", help="table, json or github")] = "table",
               explain: Annotated[bool, typer.Option(
                   "--explain", help="Also list every dropped cell with the rule that dropped it.")] = False,
               match: MatchOpt = None,
               shard: Annotated[str | None, typer.Option(
                   "--shard", help="K/N: only the K-th of N interleaved slices of the images (for github).")] = None,
               ) -> None:
    """List the cells the matrix expands to (after include/exclude and the compatibility rules)."""
    expansion = expand_matrix(matrix)
    expansion.cells = select(expansion.cells, None, matrix, match)
    if fmt == "json":
        out.print_json(json.dumps(_json_rows(expansion, explain)))
    elif fmt == "github":
        plans = _shard(plan_images(expansion.cells), shard)
        if len(plans) > GITHUB_MAX_JOBS:
            raise InputError([Problem(matrix, None, "--format github", f"{len(plans)} images exceed GitHub's "
                                      f"{GITHUB_MAX_JOBS} jobs per matrix: split them with --shard K/N")])
        # One line, for `echo "cells=$(builder matrix --format github)" >> $GITHUB_OUTPUT` and fromJSON().
        print(json.dumps({"include": [_github_row(p) for p in plans]}, separators=(",", ":")))
    elif fmt == "table":
        _print_cells(expansion, matrix)
        if explain:
            _print_dropped(expansion)
    else:
        raise InputError([Problem(matrix, None, "--format", f"unknown format {fmt!r}; use table, json or github")])


def _shard(plans: list[ImagePlan], shard: str | None) -> list[ImagePlan]:
    if shard is None:
        return plans
    k, sep, n = shard.partition("/")
    if not (sep and k.isdigit() and n.isdigit() and 1 <= int(k) <= int(n)):
        raise InputError([Problem(Path("(command line)"), None, "--shard", f"{shard!r} is not K/N with 1 <= K <= N")])
    return plans[int(k) - 1::int(n)]


def _cell_row(c: CellSpec) -> dict[str, Any]:
    return {**c.model_dump(exclude={"line", "explicit_tag"}), "python": c.python, "rocm": c.rocm,
            "image_tag": c.content_cell().tag}


def _json_rows(expansion: Expansion, explain: bool) -> dict[str, Any] | list[dict[str, Any]]:
    cells = [_cell_row(c) for c in expansion.cells]
    if not explain:
        return cells
    return {"cells": cells,
            "dropped": [{**_cell_row(d.cell), "rule": d.rule, "reason": d.reason} for d in expansion.dropped],
            "overridden": [{"tag": d.cell.tag, "rule": d.rule, "reason": d.reason, "override": d.override}
                           for d in expansion.overridden]}


def _github_row(plan: ImagePlan) -> dict[str, str]:
    """One job per image: `tag` selects it (builder publish --cell TAG), `tags` are all it is pushed as."""
    c = plan.content
    return {"tag": c.tag, "tags": " ".join(plan.tags), "os": c.os, "platform": c.platform, "torch": c.torch,
            "gfx": c.gfx or "", "flavor": c.flavor, "channel": c.channel}


def _print_cells(expansion: Expansion, matrix: Path) -> None:
    images = len(plan_images(expansion.cells))
    table = Table(title=f"{len(expansion.cells)} cells ({images} images) from {matrix}")
    table.add_column("tag", no_wrap=True)
    for col in ("channel", "torch", "companions", "user"):
        table.add_column(col)
    for c in expansion.cells:
        companions = f"{c.torchvision or '-'} / {c.torchaudio or '-'}"
        table.add_row(c.tag, c.channel, c.torch, companions, c.user)
    out.print(table)
    for d in expansion.overridden:
        out.print(f"[yellow]override[/yellow] {d.cell.tag}: breaks {d.rule} ({escape(d.reason)}); built because: "
                  f"{escape(d.override or '')}", soft_wrap=True)


def _print_dropped(expansion: Expansion) -> None:
    reasons: dict[str, list[str]] = {}
    for d in expansion.dropped:
        reasons.setdefault(d.cell.tag + f" ({d.cell.channel})", []).append(f"{d.rule}: {d.reason}")
    out.print(f"\n{len(reasons)} cells of the product dropped (by the matrix's excludes or the compatibility rules):")
    for tag, why in reasons.items():
        out.print(f"  [red]{tag}[/red]", soft_wrap=True)
        for line in why:
            out.print(f"      {escape(line)}", soft_wrap=True)


@app.command()
@handles_errors
def render(matrix: MatrixOpt = Path("matrix.yaml"),
           out_dir: Annotated[Path, typer.Option("--out", help="Where the per-cell folders go.")] = Path("images"),
           check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if --out has drifted.")] = False,
           ) -> None:
    """Render every cell's Dockerfile into images/<tag>/ (production wheel sources), or check for drift."""
    rendered = [render_cell(plan.content) for plan in plan_images(load_matrix(matrix))]
    if check:
        problems = context.drift(out_dir, rendered)
        for p in problems:
            err.print(f"[red]drift:[/red] {escape(p)}")
        if problems:
            err.print("run `builder render` and commit the result")
            raise typer.Exit(EXIT_FAILED)
        out.print(f"{len(rendered)} Dockerfiles in {out_dir} match the template and matrix")
        return
    written = context.write_images(out_dir, rendered)
    out.print(f"wrote {len(written)} Dockerfiles under {out_dir}")


@app.command()
@handles_errors
def build(matrix: MatrixOpt = Path("matrix.yaml"), wheelhouse_dir: WheelhouseOpt = None, cell: CellOpt = None,
          push: Annotated[bool, typer.Option("--push", help="Push every image that passed validation.")] = False,
          registry: RegistryOpt = None,
          validate: Annotated[bool, typer.Option("--validate/--no-validate",
                                                 help="Validate images (refused with --push).")] = True,
          gpu: Annotated[bool, typer.Option("--gpu", help="Also run the GPU checks (on a ROCm host).")] = False,
          report: Annotated[Path | None, typer.Option("--report", help="Write a JSON report here.")] = None,
          quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not stream build logs.")] = False,
          ) -> None:
    """Build every cell, validate each image, and with --push publish only those that passed."""
    if push and not validate:
        raise InputError([Problem(Path("(command line)"), None, "--no-validate",
                                  "refused with --push: an unvalidated image is never pushed")])
    if push and not registry:
        raise InputError([Problem(Path("(command line)"), None, "--registry",
                                  "--push needs --registry REGISTRY/NAMESPACE (or RIF_REGISTRY)")])
    cells = select(load_matrix(matrix), cell, matrix)
    client = connect()
    options = pipeline.Options(WheelSource(wheelhouse_dir.resolve() if wheelhouse_dir else None), validate,
                               registry if push else None, gpu)
    reports = pipeline.run(
        client, cells, options,
        on_line=(lambda c, line: None) if quiet else (lambda c, line: out.print(f"[dim]{c.tag} |[/dim] {escape(line)}",
                                                                                markup=True, soft_wrap=True)),
        on_stage=lambda c, stage: out.print(f"[bold]==> {stage}[/bold] {c.tag}"))
    _print_summary(reports)
    if report:
        report.write_text(json.dumps([_report_row(r) for r in reports], indent=2))
    raise typer.Exit(EXIT_FAILED if any(r.failed for r in reports) else EXIT_OK)


def _print_summary(reports: list[pipeline.ImageReport]) -> None:
    for r in reports:
        if r.build and not r.build.ok:
            err.print(f"[red]build failed[/red] {r.cell.tag}: {escape(str(r.build.error))}")
            for line in r.build.log_tail[-15:]:
                err.print(f"    {line}", markup=False)
        if r.validation and not r.validation.ok:
            _print_failures(r.cell.tag, r.validation)
        for p in r.pushes:
            if not p.ok:
                err.print(f"[red]push failed[/red] {p.ref}: {escape(str(p.error))}")
    table = Table(title="summary")
    table.add_column("image", no_wrap=True)
    for col in ("tags", "status", "build s", "validate s"):
        table.add_column(col, no_wrap=True)
    for r in reports:
        table.add_row(r.cell.tag, str(len(r.plan.tags)), r.status, f"{r.build.seconds:.1f}" if r.build else "-",
                      f"{r.validation.seconds:.1f}" if r.validation else "-")
    out.print(table)
    for r in reports:
        for p in r.pushes:
            if p.ok:
                out.print(f"pushed {p.ref}@{p.digest}", soft_wrap=True)


def _print_failures(tag: str, result: ValidationResult) -> None:
    err.print(f"[red]validation failed[/red] {tag}:")
    for c in result.failures:
        err.print(f"    {c.suite}/{c.name}: {c.detail}", markup=False)
        if c.fix:
            err.print(f"        fix: {c.fix}", markup=False)


def _report_row(r: pipeline.ImageReport) -> dict[str, Any]:
    digests = {p.digest for p in r.pushes if p.ok}
    return {
        "tag": r.cell.tag, "tags": r.plan.tags, "status": r.status, "content_hash": r.rendered.content_hash,
        "image": r.build.ref if r.build else None, "image_id": r.build.image_id if r.build else None,
        "build_seconds": r.build.seconds if r.build else None,
        "validation": [vars(c) for c in r.validation.checks] if r.validation else None,
        "pushed": [p.ref for p in r.pushes if p.ok], "digest": digests.pop() if len(digests) == 1 else None,
    }


@app.command()
@handles_errors
def publish(matrix: MatrixOpt = Path("matrix.yaml"), registry: RegistryOpt = None, cell: CellOpt = None,
            match: MatchOpt = None, wheelhouse_dir: WheelhouseOpt = None,
            dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be built, pushed and "
                                                  "re-tagged; touch nothing.")] = False,
            record: Annotated[Path, typer.Option("--record", help="Where the JSON run record goes.")]
            = Path("publish-record.json"),
            quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Do not stream build logs.")] = False,
            ) -> None:
    """Publish what changed: build, validate, push under an immutable tag, then move the cells' tags."""
    from builder.publish import Publisher, write_record

    if not registry:
        raise InputError([Problem(Path("(command line)"), None, "--registry",
                                  "needs REGISTRY/NAMESPACE (or RIF_REGISTRY)")])
    expansion = expand_matrix(matrix)
    cells = select(expansion.cells, cell, matrix, match)
    publisher = Publisher(
        connect(), registry, WheelSource(wheelhouse_dir.resolve() if wheelhouse_dir else None), dry_run,
        on_stage=lambda tag, stage: out.print(f"[bold]==> {escape(stage)}[/bold] {tag}"),
        on_line=(lambda tag, line: None) if quiet else (
            lambda tag, line: out.print(f"[dim]{tag} |[/dim] {escape(line)}", soft_wrap=True)))
    with tempfile.TemporaryDirectory(prefix="rif-publish-") as tmp:
        records = publisher.publish(cells, expansion.cells, expansion.default_os, Path(tmp))
    write_record(record, registry, records)
    _print_publish_summary(records, registry, dry_run)
    out.print(f"run record: {record}")
    raise typer.Exit(EXIT_FAILED if any(r.state == "failed" for r in records) else EXIT_OK)


def _print_publish_summary(records: list[Any], registry: str, dry_run: bool) -> None:
    table = Table(title=f"{'dry run: ' if dry_run else ''}publish to {registry}")
    table.add_column("image", no_wrap=True)
    for col in ("state", "immutable tag", "digest", "moved tags"):
        table.add_column(col)
    colors = {"built": "green", "skipped": "cyan", "failed": "red", "would-build": "yellow", "would-skip": "cyan"}
    for r in records:
        why = f" ({escape(r.failure)})" if r.failure else ""
        table.add_row(r.image, f"[{colors.get(r.state, 'white')}]{r.state}[/]{why}", r.immutable_tag,
                      r.digest or "-", " ".join(r.moved) or "-")
    out.print(table)
    for r in records:
        for check in r.failed_checks:
            err.print(f"[red]failed[/red] {r.image}: {escape(check)}")
    counts = {s: sum(r.state == s for r in records) for s in ("built", "skipped", "failed")}
    out.print(f"{counts['built']} built, {counts['skipped']} unchanged, {counts['failed']} failed")


@app.command("test")
@handles_errors
def test_cmd(image: Annotated[str, typer.Argument(help="Image reference to validate.")],
             matrix: Annotated[Path | None, typer.Option("--matrix", "-m", help=(
                 "Hold the image to its cell in this matrix (found by tag); default: the cell baked into it."))]
             = None, wheelhouse_dir: WheelhouseOpt = None,
             gpu: Annotated[bool, typer.Option("--gpu", help="Pass the ROCm devices and require a GPU.")] = False,
             ) -> None:
    """Validate an existing image: the testinfra suite, then the in-image smoke test."""
    client = connect()
    expect, labels = _expectations(client, image, matrix, wheelhouse_dir)
    result = validate_image(client, image, expect, labels, gpu=gpu)
    _print_checks(result)
    if not result.ok:
        _print_failures(image, result)
    raise typer.Exit(EXIT_OK if result.ok else EXIT_FAILED)


def _expectations(client: Any, image: str, matrix: Path | None,
                  wheelhouse_dir: Path | None) -> tuple[dict[str, Any], dict[str, str] | None]:
    from docker.errors import ImageNotFound

    try:
        found = client.images.get(image)
    except ImageNotFound as exc:
        raise InputError([Problem(Path("(command line)"), None, "IMAGE", f"no local image {image!r}")]) from exc
    if matrix is None:
        code, raw, stderr = run_captured(client, image, ["cat", f"/opt/rif/{CELL_FILE}"], entrypoint=[])
        if code != 0:
            raise InputError([Problem(Path("(command line)"), None, "IMAGE",
                                      f"{image} was not built by rocm-image-factory: {stderr.strip()}")])
        return json.loads(raw), None
    tag = (found.labels or {}).get("org.rocm-image-factory.tag", "")
    plans = {plan.content.tag: plan.content for plan in plan_images(load_matrix(matrix))}
    if tag not in plans:
        raise InputError([Problem(matrix, None, "IMAGE", f"{image} (tag {tag!r}) is no image of this matrix")])
    cell = plans[tag]
    rendered = render_cell(cell, WheelSource(wheelhouse_dir.resolve() if wheelhouse_dir else None))
    return cell.expectations(), rendered.labels


def _print_checks(result: ValidationResult) -> None:
    table = Table(title=f"validation of {result.ref}")
    for col in ("suite", "check", "status", "detail"):
        table.add_column(col)
    colors = {"pass": "green", "fail": "red", "skip": "yellow", "warn": "magenta", "info": "cyan"}
    for c in result.checks:
        detail = c.detail + (f" (fix: {c.fix})" if c.fix else "")
        table.add_row(c.suite, c.name, f"[{colors[c.status]}]{c.status}[/]", escape(detail))
    out.print(table)
    out.print("[green]passed[/green]" if result.ok else f"[red]{len(result.failures)} check(s) failed[/red]")


@app.command()
@handles_errors
def push(images: Annotated[list[str], typer.Argument(help="Local images built by builder.")],
         registry: RegistryOpt = None) -> None:
    """Validate, then push existing images under their cell tag; an image that fails is not pushed."""
    if not registry:
        raise InputError([Problem(Path("(command line)"), None, "--registry", "needs REGISTRY/NAMESPACE")])
    from builder.push import push_image

    client = connect()
    failed = False
    for image in images:
        expect, labels = _expectations(client, image, None, None)
        result = validate_image(client, image, expect, labels)
        if not result.ok:
            _print_failures(image, result)
            failed = True
            continue
        name = image.rsplit(":", 1)[0].rsplit("/", 1)[-1]
        pushed = push_image(client, image, f"{registry}/{name}", expect["tag"])
        if pushed.ok:
            out.print(f"pushed {pushed.ref}@{pushed.digest}")
        else:
            err.print(f"[red]push failed[/red] {pushed.ref}: {escape(str(pushed.error))}")
            failed = True
    raise typer.Exit(EXIT_FAILED if failed else EXIT_OK)


@app.command()
@handles_errors
def base(os_name: Annotated[str, typer.Argument(metavar="OS", help="e.g. debian-12")],
         mirror: Annotated[str | None, typer.Option(help="Package mirror; default: the host's apt sources.")] = None,
         tag: Annotated[str | None, typer.Option(help="Image reference; default: the OS's base, e.g. debian:12.")]
         = None) -> None:
    """Make an OS base image with debootstrap and `docker import` (for hosts that cannot pull)."""
    connect()
    try:
        ref = baseimage.build_base(os_name, mirror, tag)
    except subprocess.CalledProcessError as exc:
        err.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_FAILED) from exc
    out.print(f"imported {ref}")


@app.command("wheelhouse")
@handles_errors
def wheelhouse_cmd(matrix: MatrixOpt = Path("matrix.yaml"),
                   dest: Annotated[Path, typer.Option("--dest", help="Directory to fill.")] = Path("wheelhouse"),
                   cell: CellOpt = None,
                   index_url: Annotated[str | None, typer.Option(help="One index for every cell.")] = None,
                   use_pip_config: Annotated[bool, typer.Option(
                       "--use-pip-config", help="Use the host pip's configured indexes, not the cells'.")] = False,
                   ) -> None:
    """Download every wheel the cells install into a directory, with the host's pip."""
    cells = select(load_matrix(matrix), cell, matrix)
    try:
        wheelhouse.fill(cells, dest, index_url, use_pip_config)
    except subprocess.CalledProcessError as exc:
        err.print(f"[red]error:[/red] pip download failed ({exc.returncode})")
        raise typer.Exit(EXIT_FAILED) from exc
    out.print(f"{len(list(dest.glob('*.whl')))} wheels in {dest}")


def main() -> None:
    os.environ.setdefault("DOCKER_BUILDKIT", "0")
    sys.exit(app())
