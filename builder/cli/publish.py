"""Publishing to a registry: `publish` (build, validate and push what changed in the matrix) and `push` (images
already built here). `plan` (builder/cli/planning.py) and `stages` (builder/cli/stages.py) are their own commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from builder.buildkit.engine import connect
from builder.cli import flags, runs
from builder.cli.kit import (
    BuilderOpt,
    BuildNetworkOpt,
    InsecureOpt,
    Progress,
    ProgressOpt,
    RecordOpt,
    RegistryOpt,
    buildkit,
    handles_errors,
    needs_registry,
)
from builder.pipeline import jobs
from builder.pipeline.options import BakeOptions, Options, PushOptions
from builder.registry import reference
from builder.registry.address import check_insecure


@handles_errors
@flags.grouped
def publish(selection: flags.Selection, registry: RegistryOpt = None, insecure: InsecureOpt = None,
            checks: flags.Checks = flags.NO_CHECKS,
            no_push: Annotated[bool, typer.Option("--no-push", help=(
                "Build and validate what changed; push nothing and move no tag (states `validated`, `failed`, "
                "`would-skip`)."))] = False,
            record_path: RecordOpt = Path("publish-record.json"), cache_registry: flags.CacheRegistryOpt = None,
            compression: flags.CompressionOpt = "gzip",
            by_family: Annotated[bool, typer.Option("--by-family", help=(
                "One GPU family at a time: bake, validate and push a family's images, then remove the previous "
                "family's from the engine and prune BuildKit's cache of them (for a runner whose disk cannot hold "
                "the whole row)."))] = False,
            builder: BuilderOpt = None, build_network: BuildNetworkOpt = "default",
            progress: ProgressOpt = Progress.auto,
            ) -> None:
    """Publish what changed: build, validate, push under an immutable tag, then move the cells' tags."""
    insecure_hosts = check_insecure(insecure)
    kit = buildkit(builder, build_network)
    checked = needs_registry(registry)
    bake = BakeOptions(source=selection.source(), compression=flags.compression(compression),
                       cache=flags.cache(cache_registry, insecure_hosts, write=not no_push), buildkit=kit,
                       by_family=by_family)
    todo = selection.jobs()
    options = Options(bake=bake, validate=checks.options(),
                      push=PushOptions(target=runs.target(checked, insecure_hosts), skip_published=True,
                                       no_push=no_push))
    raise typer.Exit(runs.run(todo, options, progress, record_path, checked))


@handles_errors
@flags.grouped
def push(images: Annotated[list[str], typer.Argument(help="Local images built by builder.")],
         checks: flags.Checks, registry: RegistryOpt = None, insecure: InsecureOpt = None,
         report: Annotated[Path | None, typer.Option("--report", help="Write the JSON run record here.")] = None,
         progress: ProgressOpt = Progress.auto,
         ) -> None:
    """Validate, then push existing images under their immutable tag and move their cell tag to it."""
    insecure_hosts = check_insecure(insecure)
    checked = needs_registry(registry)
    for image in images:  # each a Docker reference, before any engine call
        reference.parse(image)
    client = connect()
    todo = [jobs.job_for_image(client, image) for image in images]
    options = Options(validate=checks.options(), push=PushOptions(target=runs.target(checked, insecure_hosts)))
    raise typer.Exit(runs.run(todo, options, progress, report, checked))

