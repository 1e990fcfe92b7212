"""`builder catalog`: a static site (HTML and Markdown) of what a registry namespace publishes."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from builder.cli import console
from builder.cli.kit import EXIT_FAILED, InsecureOpt, RegistryOpt, handles_errors
from builder.core.errors import usage_error
from builder.core.text import safe
from builder.registry.address import check_insecure


@handles_errors
def catalog_cmd(out: Annotated[Path, typer.Option("--out", metavar="DIR", help=(
                    "Directory for the site: new, empty, or a catalog written there before."))],
                registry: RegistryOpt = None, insecure: InsecureOpt = None,
                records: Annotated[list[Path] | None, typer.Option(
                    "--records", metavar="PATH", exists=True,
                    help="A run record, or a directory of them (repeatable): installed sizes, smoke reports.")]
                = None,
                repository: Annotated[list[str] | None, typer.Option(
                    "--repository", metavar="NAME",
                    help="Repository under the namespace (repeatable); default: those the records name, "
                         "else pytorch.")] = None,
                images_dir: Annotated[list[Path] | None, typer.Option(
                    "--images", metavar="DIR", help="Where images/<tag>/Dockerfile are looked up first "
                                                    "(repeatable); then ./images.")] = None,
                ) -> None:
    """Write a static catalog of the published images (HTML and Markdown): sizes, contents, smoke reports."""
    from builder import site

    insecure_hosts = check_insecure(insecure)
    if not registry:
        raise usage_error("--registry", "needs REGISTRY/NAMESPACE (or RIF_REGISTRY)")
    catalog, _ = site.build_catalog(registry, out, records, repository, images_dir, insecure=insecure_hosts)
    for warning in catalog.warnings:
        console.err.print(f"[yellow]warning:[/yellow] {safe(warning)}")
    console.out.print(f"catalog of {len(catalog.images)} images: {safe(out / 'index.html')}")
    if catalog.warnings:  # a page, a row or a repository left out: the site is written, and incomplete
        console.error(f"{len(catalog.warnings)} thing(s) left out of the catalog: see the warnings above")
        raise typer.Exit(EXIT_FAILED)
