"""Publishing to a registry: `publish` (what changed in the matrix) and `push` (images already built here)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from builder.buildkit.engine import connect
from builder.buildkit.export import Cache
from builder.cli import console, planning, runs, stages
from builder.cli.kit import (
    ApptainerOpt,
    BuilderOpt,
    BuildNetworkOpt,
    CellOpt,
    GpuOpt,
    InsecureOpt,
    LocksOpt,
    MatchOpt,
    MatrixOpt,
    Progress,
    ProgressOpt,
    QuietOpt,
    RegistryOpt,
    RunnerDiskOpt,
    RunnerOpt,
    WheelhouseOpt,
    buildkit,
    handles_errors,
    wheel_source,
)
from builder.core.errors import usage_error
from builder.pipeline import jobs
from builder.pipeline.options import BakeOptions, Options, PushOptions, ValidateOptions
from builder.publish import runners
from builder.registry.address import check_insecure, check_registry, plain_http_ok


@handles_errors
def publish(matrix: MatrixOpt = Path("matrix.yaml"), registry: RegistryOpt = None, insecure: InsecureOpt = None,
            cell: CellOpt = None,
            match: MatchOpt = None, wheelhouse_dir: WheelhouseOpt = None, locks: LocksOpt = None, gpu: GpuOpt = False,
            apptainer: ApptainerOpt = False,
            plan: Annotated[bool, typer.Option("--plan", help="Look up what would be built, skipped and re-tagged; "
                                               "build nothing, push nothing.")] = False,
            no_push: Annotated[bool, typer.Option("--no-push", help=(
                "Build and validate what changed; push nothing and move no tag (states `validated`, `failed`, "
                "`would-skip`)."))] = False,
            dry_run: Annotated[bool, typer.Option("--dry-run", hidden=True,
                                                  help="Deprecated: the old name of --plan.")] = False,
            record_path: Annotated[Path, typer.Option("--record", help="Where the JSON run record goes.")]
            = Path("publish-record.json"),
            cache_registry: Annotated[str | None, typer.Option(
                "--cache-registry", metavar="HOST/NS", help=(
                    "Import BuildKit's cache from, and export it to, HOST/NS/buildcache:<target> (every stage), so a "
                    "cold runner rebuilding after a small change reinstalls nothing unchanged. Credentials: docker "
                    "login."))] = None,
            compression: Annotated[str, typer.Option("--compression", metavar="gzip|zstd", help=(
                "The layers' compression: gzip (default: every Docker and containerd client pulls it) or zstd "
                "(faster to pull and unpack; Docker 23+, containerd 1.5+)."))] = "gzip",
            fmt: Annotated[str, typer.Option("--format", metavar="text|json|github", help=(
                "With --plan: a table (text), every image with its action and why (json), or the workflow's rows "
                "of the combinations with an image to build (github)."))] = "text",
            move_tags: Annotated[bool, typer.Option("--move-tags", help=(
                "With --plan: move the tags of published images that point elsewhere, registry-side by digest "
                "(no engine, no build)."))] = False,
            shard_spec: Annotated[str | None, typer.Option("--shard", metavar="K/N", help=(
                "Only the K-th of N interleaved slices of the combinations (a combination's images stay "
                "together)."))] = None,
            shared_stages: Annotated[bool, typer.Option("--shared-stages", help=(
                "Only build the stages several of the selected combinations share (the OS base, torch), once, "
                "into --cache-registry, for per-combination publish jobs to import; push no image."))] = False,
            runner_disk: RunnerDiskOpt = None, runner: RunnerOpt = None,
            release: Annotated[bool, typer.Option("--release", help=(
                "One GPU family at a time: bake, validate and push a family's images, then remove the previous "
                "family's from the engine and prune BuildKit's cache of them (for a runner whose disk cannot hold "
                "the whole row)."))] = False,
            builder: BuilderOpt = None, build_network: BuildNetworkOpt = "default",
            quiet: QuietOpt = False, progress: ProgressOpt = Progress.auto,
            ) -> None:
    """Publish what changed: build, validate, push under an immutable tag, then move the cells' tags."""
    insecure_hosts = check_insecure(insecure)
    kit = buildkit(builder, build_network)
    if dry_run:
        console.err.print("warning: --dry-run is deprecated: it means --plan (builds nothing); "
                       "--no-push builds and validates without pushing", soft_wrap=True)
        plan = True
    if plan and no_push:
        raise usage_error("--no-push", "--plan builds nothing and --no-push builds: pass one of them")
    if not registry:
        raise usage_error("--registry", "needs REGISTRY/NAMESPACE (or RIF_REGISTRY)")
    planning.check_format(fmt, plan, move_tags)
    for option, value in (("--runner-disk", runner_disk), ("--runner", runner)):
        if value is not None and not (plan or shared_stages):
            raise usage_error(option, "sizes the rows of --plan and the parts --shared-stages shares: add one")
    where = runners.resolve(matrix, runner, runner_disk) if plan or shared_stages else runners.HOSTED
    todo = jobs.shard_jobs(jobs.matrix_jobs(matrix, cell, match, wheel_source(wheelhouse_dir, locks)), shard_spec)
    if shared_stages and plan:
        raise usage_error("--shared-stages", "builds stages and --plan builds nothing: pass one of them")
    if plan:  # its own path: the registry alone answers, no engine
        raise typer.Exit(planning.run_plan(todo, runs.target(registry, insecure_hosts), fmt, move_tags, record_path,
                                           registry, where, _cache(cache_registry, insecure_hosts)))
    target = runs.target(registry, insecure_hosts)
    bake = BakeOptions(source=wheel_source(wheelhouse_dir, locks), compression=_compression(compression),
                       cache=_cache(cache_registry, insecure_hosts, write=not no_push), buildkit=kit,
                       row_of=planning.row_of(todo, where) if shared_stages else {}, release=release)
    if shared_stages:  # its own path: stages into the registry cache, no image
        raise typer.Exit(stages.run_stages(todo, bake))
    options = Options(bake=bake, validate=ValidateOptions(gpu=gpu, apptainer=apptainer),
                      push=PushOptions(target=target, skip_published=True, no_push=no_push))
    raise typer.Exit(runs.run(todo, options, progress, record_path, registry))


@handles_errors
def push(images: Annotated[list[str], typer.Argument(help="Local images built by builder.")],
         registry: RegistryOpt = None, insecure: InsecureOpt = None, gpu: GpuOpt = False,
         apptainer: ApptainerOpt = False,
         report: Annotated[Path | None, typer.Option("--report", help="Write the JSON run record here.")] = None,
         progress: ProgressOpt = Progress.auto,
         ) -> None:
    """Validate, then push existing images under their immutable tag and move their cell tag to it."""
    insecure_hosts = check_insecure(insecure)
    if not registry:
        raise usage_error("--registry", "needs REGISTRY/NAMESPACE")
    client = connect()
    todo = [jobs.job_for_image(client, image) for image in images]
    options = Options(validate=ValidateOptions(gpu=gpu, apptainer=apptainer),
                      push=PushOptions(target=runs.target(registry, insecure_hosts)))
    raise typer.Exit(runs.run(todo, options, progress, report, registry))


def _compression(name: str) -> str:
    if name not in ("gzip", "zstd"):
        raise usage_error("--compression", f"{name!r}: gzip or zstd")
    return name


def _cache(cache_registry: str | None, insecure: frozenset[str], write: bool = True) -> Cache | None:
    """BuildKit's registry cache at HOST/NS/buildcache, over plain HTTP only where the registry client would;
    write=False (--no-push): imported only, never exported."""
    if not cache_registry:
        return None
    checked = check_registry(cache_registry, "--cache-registry")
    return Cache(f"{checked}/buildcache", plain_http_ok(checked.split("/", 1)[0], insecure), write=write)
