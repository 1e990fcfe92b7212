"""Auditing published images: `diff` (packages changed between two, by SBOM) and `reproduce` (rebuild, compare)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from builder.cli import console
from builder.cli.kit import (
    EXIT_FAILED,
    EXIT_OK,
    PRODUCTION_MATRIX,
    BuilderOpt,
    BuildNetworkOpt,
    InsecureOpt,
    LocksOpt,
    MatrixOpt,
    Progress,
    ProgressOpt,
    WheelhouseOpt,
    buildkit,
    handles_errors,
    terminates,
    wheel_source,
)
from builder.cli.progress import RunView
from builder.core.errors import InputError, usage_error
from builder.core.scratch import scratch_dir
from builder.core.text import safe
from builder.pipeline import baking, jobs
from builder.registry.address import check_insecure
from builder.render.sources import WheelSource

if TYPE_CHECKING:
    from builder.audit import reproduce
    from builder.audit.diff import Diff, Inventory


@handles_errors
def diff_cmd(image_a: Annotated[str, typer.Argument(metavar="A", help="REGISTRY/NS/REPO:TAG or ...@sha256:HEX")],
             image_b: Annotated[str, typer.Argument(metavar="B", help="The image to compare A with, likewise.")],
             as_json: Annotated[bool, typer.Option("--json", help="Print the changes as JSON.")] = False,
             insecure: InsecureOpt = None,
             ) -> None:
    """Which OS and Python packages changed between two published images, read from their attached SBOMs.

    Exit 0 with the changes (none is an answer too), 1 when an image has no SBOM or SBOM entries were left out
    (the changes are printed, with a warning each), 2 for a bad reference.
    """
    from builder.audit import diff

    insecure_hosts = check_insecure(insecure)
    refs = [diff.parse_ref(image_a, "A"), diff.parse_ref(image_b, "B")]
    try:
        a, b = (diff.fetch(ref, insecure_hosts) for ref in refs)
    except diff.NoSbom as exc:
        console.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    found = diff.diff(a.packages, b.packages)
    if as_json:
        print(json.dumps(diff.as_json(a, b, found), indent=2))
    else:
        print_diff(a, b, found)
    lost = a.warnings + b.warnings  # components of no readable shape: the diff is printed, and incomplete
    for warning in lost:
        console.err.print(f"[yellow]warning:[/yellow] {safe(warning)}")
    raise typer.Exit(EXIT_FAILED if lost else EXIT_OK)


@handles_errors
def reproduce_cmd(image: Annotated[str, typer.Argument(metavar="REF", help="REGISTRY/NS/REPO:TAG or ...@sha256:HEX")],
                  matrix: MatrixOpt = PRODUCTION_MATRIX, wheelhouse_dir: WheelhouseOpt = None, locks: LocksOpt = None,
                  insecure: InsecureOpt = None, builder: BuilderOpt = None,
                  build_network: BuildNetworkOpt = "default", progress: ProgressOpt = Progress.auto,
                  ) -> None:
    """Rebuild a published image from this repository without BuildKit's cache and compare it byte for byte.

    A locked image is rebuilt from the lock recorded with it (not the checkout's), unless --locks names one.

    Exit 0 when the rebuild's manifest digest is the published one; 1 when it differs (the first differing
    layer and its files are named) or cannot be rebuilt; 2 for a bad reference.
    """
    from builder.audit import diff, layers, origin, reproduce
    from builder.registry import credentials
    from builder.registry.client import RegistryClient

    ref = diff.parse_ref(image, "REF")
    kit = buildkit(builder, build_network)
    api = RegistryClient(ref.registry, credentials.lookup(ref.registry), insecure=check_insecure(insecure))

    def rebuild(published: reproduce.Published, layout: Path) -> str:
        with scratch_dir("rif-reproduce-locks-") as scratch:
            source = _lock_source(published, matrix, wheelhouse_dir, locks, scratch)
            try:
                [job] = jobs.matrix_jobs(matrix, [published.tag], None, source)
            except InputError as exc:
                if not any(p.key == "--cell" for p in exc.problems):
                    raise
                default = matrix.resolve() == PRODUCTION_MATRIX.resolve()
                raise usage_error("--matrix", origin.not_in_matrix(str(ref), published.tag, matrix, default)) from None
            if job.content_hash != published.content_hash:
                raise reproduce.ReproduceError(
                    f"{ref} was built from other inputs (content hash {published.content_hash}) than {matrix} and this "
                    f"checkout give {published.tag} ({job.content_hash}): check out the commit that published it")
            view = RunView([job.tag], progress.value, console=console.err)
            with terminates(), view.running():
                built = baking.rebuild(job, source, layout, published.compression, view.events(), kit)
        if not built.ok or built.manifest_digest is None:
            raise reproduce.ReproduceError(f"{published.tag}: the rebuild failed: {built.error}")
        return built.manifest_digest

    try:
        verdict = reproduce.check(str(ref), ref.repository, ref.reference, api, rebuild)
    except (reproduce.ReproduceError, layers.LayerError) as exc:
        console.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    for line in verdict.lines():
        print(line)
    raise typer.Exit(EXIT_OK if verdict.identical else EXIT_FAILED)


def _lock_source(published: reproduce.Published, matrix: Path, wheelhouse_dir: Path | None, locks: Path | None,
                 scratch: Path) -> WheelSource:
    """Which lock the rebuild uses, said in one line: --locks when given, else the lock recorded with the image
    (written into scratch as `builder lock` leaves a tree), else the checkout as it is."""
    from builder.audit import origin

    if locks is not None:
        recorded = published.lock_artifact
        unused = f" (the lock recorded with the image, {recorded}, is not used)" if published.lock else ""
        print(f"using the locks of --locks {safe(str(locks))}, as given{unused}")
        return wheel_source(wheelhouse_dir, locks)
    if published.lock is None:
        print("no lock is recorded with the image: rebuilding from this checkout as it is (--locks DIR: from DIR)")
        return wheel_source(wheelhouse_dir)
    group = origin.combination(matrix, published.tag)
    if group is None:  # the matrix has no such cell: the render that follows says so
        return wheel_source(wheelhouse_dir)
    published.lock.write(scratch, group)
    print(f"using the lock recorded with the image: {published.lock_artifact}, {published.lock.summary()}")
    return wheel_source(wheelhouse_dir, scratch)


def print_diff(a: Inventory, b: Inventory, found: Diff) -> None:
    """builder diff: one row per package that changed between two images (builder.audit.diff Inventory, Diff)."""
    for side, inv in (("A", a), ("B", b)):
        ref = str(inv.ref) if "@" in str(inv.ref) else f"{inv.ref}@{inv.digest}"
        console.out.print(f"{side}: {safe(ref)} ({len(inv.packages)} packages)", soft_wrap=True)
    if not found.changes:
        console.out.print("no package changed")
        return
    table = Table(title_justify="left")
    for column in ("", "kind", "package", "A", "B"):
        table.add_column(column, overflow="fold")
    marks = {"added": "[green]+[/]", "removed": "[red]-[/]", "changed": "[yellow]~[/]"}
    for c in found.changes:
        table.add_row(marks[c.kind], "os" if c.ecosystem == "deb" else "python", safe(c.name), safe(c.before or "-"),
                      safe(c.after or "-"))
    console.out.print(table)
    console.out.print(", ".join(f"{len(found.of(k))} {k}" for k in ("added", "removed", "changed")))
