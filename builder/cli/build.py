"""Images on this host: `build` (and validate, and with --push publish), `test`, `base` and `prune`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from builder.buildkit import baseimage
from builder.buildkit.engine import connect
from builder.buildkit.prune import Pruned
from builder.cli import console, flags, runs
from builder.cli.kit import (
    EXIT_FAILED,
    EXIT_OK,
    ApptainerOpt,
    BuilderOpt,
    BuildNetworkOpt,
    CellOpt,
    GpuOpt,
    InsecureOpt,
    LocksOpt,
    MatrixOpt,
    Progress,
    ProgressOpt,
    QuietOpt,
    RegistryOpt,
    WheelhouseOpt,
    buildkit,
    handles_errors,
    wheel_source,
)
from builder.core import aptwords
from builder.core.errors import usage_error
from builder.core.text import safe
from builder.matrix.expand import load_matrix
from builder.matrix.selection import plan_images
from builder.pipeline import jobs, lifecycle
from builder.pipeline.options import BakeOptions, Options, PushOptions, ValidateOptions
from builder.registry import reference
from builder.registry.address import check_insecure
from builder.render import oslock
from builder.validate.runner import Check

CHECK_COLORS = {"pass": "green", "fail": "red", "skip": "yellow", "warn": "magenta", "info": "cyan"}


@handles_errors
@flags.grouped
def build(matrix: MatrixOpt = Path("matrix.yaml"), wheelhouse_dir: WheelhouseOpt = None, locks: LocksOpt = None,
          cell: CellOpt = None,
          push: Annotated[bool, typer.Option("--push", help="Push every image that passed validation.")] = False,
          registry: RegistryOpt = None, insecure: InsecureOpt = None,
          validate: Annotated[bool, typer.Option("--validate/--no-validate",
                                                 help="Validate images (refused with --push).")] = True,
          checks: flags.Checks = flags.NO_CHECKS,
          report: Annotated[Path | None, typer.Option("--report", help="Write the JSON run record here.")] = None,
          builder: BuilderOpt = None, build_network: BuildNetworkOpt = "default",
          quiet: QuietOpt = False, progress: ProgressOpt = Progress.auto,
          ) -> None:
    """Build every cell, validate each image, and with --push publish only those that passed."""
    kit = buildkit(builder, build_network)
    insecure_hosts = check_insecure(insecure)
    if insecure_hosts and not push:
        raise usage_error("--insecure-registry", "applies with --push only (nothing else talks to a registry)")
    if push and not validate:
        raise usage_error("--no-validate", "refused with --push: an unvalidated image is never pushed")
    if push and not registry:
        raise usage_error("--registry", "--push needs --registry REGISTRY/NAMESPACE (or RIF_REGISTRY)")
    todo = jobs.matrix_jobs(matrix, cell, None, wheel_source(wheelhouse_dir, locks))
    target = runs.target(registry, insecure_hosts) if push and registry else None
    if (checks.apptainer or checks.revalidate) and not validate:
        raise usage_error("--apptainer" if checks.apptainer else "--revalidate",
                          "is a validation: refused with --no-validate")
    options = Options(bake=BakeOptions(source=wheel_source(wheelhouse_dir, locks), buildkit=kit),
                      validate=checks.options() if validate else None,
                      push=PushOptions(target=target) if target is not None else None)
    raise typer.Exit(runs.run(todo, options, progress, report, registry if target else None))


@handles_errors
def test_cmd(image: Annotated[str, typer.Argument(help="Image reference to validate.")],
             matrix: Annotated[Path | None, typer.Option("--matrix", "-m", help=(
                 "Hold the image to its cell in this matrix (found by tag); default: the cell baked into it."))]
             = None, wheelhouse_dir: WheelhouseOpt = None, gpu: GpuOpt = False, apptainer: ApptainerOpt = False,
             ) -> None:
    """Validate an image: the testinfra suite, then the in-image smoke test (and with --apptainer, the smoke test
    under Apptainer: from its registry by digest when the image was pulled from one). An image the engine does not
    have is pulled first, as `docker run` does."""
    reference.parse(image)  # before any engine call
    plans = plan_images(load_matrix(matrix)) if matrix is not None else None
    client = connect()
    job = jobs.job_for_image(client, image, plans, wheel_source(wheelhouse_dir), pull=True)
    result = lifecycle.run_image(client, job, Options(validate=ValidateOptions(gpu=gpu, apptainer=apptainer)))
    print_checks(image, result.validation)
    if result.failed:
        console.print_failed_checks(image, result.validation)
    raise typer.Exit(EXIT_FAILED if result.failed else EXIT_OK)


@handles_errors
def base(os_name: Annotated[str, typer.Argument(metavar="OS", help="e.g. debian-12")],
         mirror: Annotated[str | None, typer.Option(help="Package mirror; default: the host's apt sources.")] = None,
         tag: Annotated[str | None, typer.Option(help="Image reference; default: the OS's base, e.g. debian:12.")]
         = None,
         snapshot: Annotated[str | None, typer.Option("--snapshot", metavar="YYYYMMDDTHHMMSSZ", help=(
             "Make it from the OS's archive snapshot at this UTC time (--mirror: a snapshot mirror, read at "
             "MIRROR/TIMESTAMP/), byte-reproducibly: the same timestamp gives the same image ID."))] = None) -> None:
    """Make an OS base image with debootstrap (for hosts that cannot pull)."""
    connect()
    if snapshot is not None:  # the snapshot mirror and whom apt trusts are read here, once
        mirror = mirror or os.environ.get(oslock.URL_ENV)
    trusted = os.environ.get(aptwords.TRUST_SETTING) == "yes"  # a test's loopback archive, unsigned
    try:
        ref = baseimage.build_base(os_name, mirror, tag, snapshot, trusted=trusted)
    except subprocess.CalledProcessError as exc:
        console.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from exc
    console.out.print(f"imported {safe(ref)}")


@handles_errors
def prune_cmd(dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")]
              = False,
              image: Annotated[str | None, typer.Option("--image", metavar="NAME", help=(
                  "Only this image repository (rocm-image-factory/NAME); default: all of them."))] = None) -> None:
    """Remove local content names (<tag>-<hash12>) that a newer build of their tag has superseded."""
    from builder.buildkit import prune

    pruned(prune.prune(connect(), dry_run, image), dry_run)


def print_checks(ref: str, checks: Sequence[Check]) -> None:
    table = Table(title=f"validation of {safe(ref)}")
    for col in ("suite", "check", "status", "detail"):
        table.add_column(col)
    for c in checks:
        detail = c.detail + (f" (fix: {c.fix})" if c.fix else "")
        table.add_row(safe(c.suite), safe(c.name), f"[{CHECK_COLORS.get(c.status, 'white')}]{c.status}[/]",
                      safe(detail))
    console.out.print(table)
    failures = sum(c.status == "fail" for c in checks)
    console.out.print("[green]passed[/green]" if checks and not failures else f"[red]{failures} check(s) failed[/red]")


def pruned(result: Pruned, dry_run: bool) -> None:
    """What `builder prune` removed (or would remove), and what the engine refused to."""
    verb = "would remove" if dry_run else "removed"
    for name in result.removed:
        console.out.print(f"{verb} {safe(name.ref)}  ({console.gb(name.size)})")
    for name, why in result.kept:
        console.err.print(f"[yellow]kept[/yellow] {safe(name.ref)}: {safe(why)}")
    if not result.removed and not result.kept:
        console.out.print("nothing to prune: every local content name is the current build of its tag, or in use")
    elif not dry_run:
        freed = console.gb(result.deleted_bytes) if result.deleted_bytes else "nothing"
        console.out.print(f"{len(result.removed)} superseded names removed; images deleted: {freed} (their size, "
                       "counting layers shared with images that stay)")
