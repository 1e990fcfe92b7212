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
from builder.core.text import safe
from builder.pipeline import jobs, lifecycle
from builder.registry.address import check_insecure

if TYPE_CHECKING:
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

    Exit 0 when the rebuild's manifest digest is the published one; 1 when it differs (the first differing
    layer and its files are named) or cannot be rebuilt; 2 for a bad reference.
    """
    from builder.audit import diff, layers, origin, reproduce
    from builder.registry import credentials
    from builder.registry.client import RegistryClient

    ref = diff.parse_ref(image, "REF")
    kit = buildkit(builder, build_network)
    api = RegistryClient(ref.registry, credentials.lookup(ref.registry), insecure=check_insecure(insecure))
    source = wheel_source(wheelhouse_dir, locks)

    def rebuild(tag: str, content_hash: str, layout: Path, compression: str) -> str:
        try:
            [job] = jobs.matrix_jobs(matrix, [tag], None, source)
        except InputError as exc:
            if not any(p.key == "--cell" for p in exc.problems):
                raise
            default = matrix.resolve() == PRODUCTION_MATRIX.resolve()
            raise usage_error("--matrix", origin.not_in_matrix(str(ref), tag, matrix, default)) from None
        if job.content_hash != content_hash:
            raise reproduce.ReproduceError(
                f"{ref} was built from other inputs (content hash {content_hash}) than {matrix} and this checkout "
                f"give {tag} ({job.content_hash}): check out the commit that published it")
        view = RunView([job.tag], progress.value, console=console.err)
        with terminates(), view.running():
            built = lifecycle.rebuild(job, source, layout, compression, view.events(), kit)
        if not built.ok or built.manifest_digest is None:
            raise reproduce.ReproduceError(f"{tag}: the rebuild failed: {built.error}")
        return built.manifest_digest

    try:
        verdict = reproduce.check(str(ref), ref.repository, ref.reference, api, rebuild)
    except (reproduce.ReproduceError, layers.LayerError) as exc:
        console.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    for line in verdict.lines():
        print(line)
    raise typer.Exit(EXIT_OK if verdict.identical else EXIT_FAILED)


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
