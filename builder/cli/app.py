"""The `builder` command: one subcommand per stage, exit 0 on success, 1 when an image failed, 2 on bad input.

Each command parses its options, calls one function of the package and prints; the work lives in the
stage modules (see README, "How it works").
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Annotated

import typer

from builder.build import baseimage
from builder.build.engine import connect
from builder.cli import display as show
from builder.cli.kit import (
    EXIT_FAILED,
    EXIT_OK,
    PRODUCTION_IMAGES,
    PRODUCTION_MATRIX,
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
    WheelhouseOpt,
    flags_as_flags,
    handles_errors,
    show_version,
    terminates,
)
from builder.cli.progress import RunView
from builder.core.errors import usage_error
from builder.core.text import safe
from builder.matrix.expand import expand_matrix, load_matrix
from builder.matrix.selection import plan_images, select, shard
from builder.publish import jobs
from builder.publish import lifecycle as pipeline
from builder.publish import rows as ghrows
from builder.publish.promote import Target
from builder.registry.address import check_insecure, check_registry, plain_http_ok
from builder.render import lockfile, wheelhouse
from builder.render import resolve as lock
from builder.render import tree as imagetree
from builder.render.dockerfile import WheelSource, render_all

app = typer.Typer(help=__doc__, no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False)

def _source(wheelhouse_dir: Path | None, locks: Path | None = None) -> WheelSource:
    return WheelSource(wheelhouse_dir.resolve() if wheelhouse_dir else None, locks.resolve() if locks else None)


def _compression(name: str) -> str:
    if name not in ("gzip", "zstd"):
        raise usage_error("--compression", f"{name!r}: gzip or zstd")
    return name


def _cache(cache_registry: str | None, insecure: frozenset[str]) -> pipeline.Cache | None:
    """BuildKit's registry cache at HOST/NS/buildcache, over plain HTTP only where the registry client would."""
    if not cache_registry:
        return None
    checked = check_registry(cache_registry, "--cache-registry")
    return pipeline.Cache(f"{checked}/buildcache", plain_http_ok(checked.split("/", 1)[0], insecure))


def _target(registry: str, insecure: frozenset[str]) -> Target:
    """Where a run pushes (--registry, checked), spoken to over plain HTTP only if loopback or named insecure."""
    return Target.of(check_registry(registry), insecure=insecure)


@app.command("matrix")
@handles_errors
def matrix_cmd(matrix: MatrixOpt = Path("matrix.yaml"),
               fmt: Annotated[str, typer.Option("--format", help="table, json or github")] = "table",
               explain: Annotated[bool, typer.Option(
                   "--explain", help="Also list every dropped cell with the rule that dropped it.")] = False,
               match: MatchOpt = None,
               shard_spec: Annotated[str | None, typer.Option(
                   "--shard", help="K/N: only the K-th of N interleaved slices of the rows (for github).")] = None,
               ) -> None:
    """List the cells the matrix expands to (after include/exclude and the compatibility rules)."""
    if fmt not in ("table", "json", "github"):
        raise usage_error("--format", f"unknown format {fmt!r}; use table, json or github")
    if shard_spec is not None and fmt != "github":
        raise usage_error("--shard", f"applies to --format github only (not {fmt})")
    if explain and fmt == "github":
        raise usage_error("--explain", "applies to --format table or json (github rows list combinations, not drops)")
    expansion = expand_matrix(matrix)
    expansion.cells = select(expansion.cells, None, matrix, match)
    if fmt == "json":
        show.print_json(show.json_rows(expansion, explain))
    elif fmt == "github":
        print(ghrows.matrix_json(shard(ghrows.rows(expansion.cells), shard_spec)))
    else:
        show.print_cells(expansion, matrix)
        if explain:
            show.print_dropped(expansion)


@app.command()
@handles_errors
def render(matrix: MatrixOpt = PRODUCTION_MATRIX,
           out_dir: Annotated[Path, typer.Option("--out", help="Where the build tree goes.")] = PRODUCTION_IMAGES,
           check: Annotated[bool, typer.Option("--check", help="Write nothing; exit 1 if --out has drifted.")] = False,
           prune: Annotated[bool, typer.Option("--prune", help=(
               "Remove files this factory rendered before and the matrix no longer renders (default for the "
               "production matrix into images/); nothing it did not write is ever removed."))] = False,
           wheelhouse_dir: WheelhouseOpt = None,
           locked: Annotated[bool | None, typer.Option("--locked/--unlocked", help=(
               "Render from the tree's lock files (base by digest, wheels by sha256; a missing or stale lock is an "
               "error), or without them. Default: locked when --out holds any lock."))] = None,
           ) -> None:
    """Render the build tree: one Dockerfile per combination, each image a target of docker-bake.json.

    The tree builds without Python: `docker buildx bake -f images/docker-bake.json TARGET` from the checkout.
    """
    production = matrix.resolve() == PRODUCTION_MATRIX.resolve()
    if out_dir == PRODUCTION_IMAGES and not (production and wheelhouse_dir is None) and not check:
        raise usage_error("--out", f"only the production matrix with its index URLs is rendered into "
                                   f"{PRODUCTION_IMAGES}/ (pass --out DIR)")
    locks = out_dir if (lockfile.has_locks(out_dir) if locked is None else locked) else None
    source = _source(wheelhouse_dir, locks)
    rendered = render_all(load_matrix(matrix), source)
    if not check:
        imagetree.write(out_dir, rendered, prune or (production and out_dir == PRODUCTION_IMAGES), source)
        groups = len({r.group for r in rendered})
        show.out.print(f"wrote {len(rendered)} images in {groups} Dockerfiles and "
                       f"{safe(out_dir / imagetree.BAKE_FILE)}")
        return
    problems = imagetree.drift(out_dir, rendered)
    for p in problems:
        show.err.print(f"[red]drift:[/red] {safe(p)}")
    if problems:
        show.err.print("run `builder render` and commit the result")
        raise typer.Exit(EXIT_FAILED)
    show.out.print(f"{len(rendered)} images in {safe(out_dir)} match the template and matrix")


def _run(todo: list[jobs.Job], options: pipeline.Options, progress: Progress, report_path: Path | None,
         registry: str | None) -> None:
    """Run the jobs, print the summary, and write the record whatever happens (interruptions included)."""
    client = connect()
    view = RunView([j.tag for j in todo], progress.value, console=show.out)
    with terminates(), view.running():
        reports = pipeline.run_and_record(client, todo, options, view.events(), report_path, registry)
    if progress == Progress.json:
        print(json.dumps({"event": "summary", "images": [r.as_json() for r in reports]}))
    else:
        rehearsal = "plan" if options.plan else "no push" if options.no_push else ""
        show.print_reports(reports, registry, rehearsal, view.log_dir)
        if report_path is not None:
            show.out.print(f"run record: {safe(report_path)}")
    raise typer.Exit(EXIT_FAILED if any(r.failed for r in reports) else EXIT_OK)





@app.command()
@handles_errors
def build(matrix: MatrixOpt = Path("matrix.yaml"), wheelhouse_dir: WheelhouseOpt = None, locks: LocksOpt = None,
          cell: CellOpt = None,
          push: Annotated[bool, typer.Option("--push", help="Push every image that passed validation.")] = False,
          registry: RegistryOpt = None, insecure: InsecureOpt = None,
          validate: Annotated[bool, typer.Option("--validate/--no-validate",
                                                 help="Validate images (refused with --push).")] = True,
          gpu: GpuOpt = False,
          report: Annotated[Path | None, typer.Option("--report", help="Write the JSON run record here.")] = None,
          quiet: QuietOpt = False, progress: ProgressOpt = Progress.auto,
          ) -> None:
    """Build every cell, validate each image, and with --push publish only those that passed."""
    insecure_hosts = check_insecure(insecure)
    if insecure_hosts and not push:
        raise usage_error("--insecure-registry", "applies with --push only (nothing else talks to a registry)")
    if push and not validate:
        raise usage_error("--no-validate", "refused with --push: an unvalidated image is never pushed")
    if push and not registry:
        raise usage_error("--registry", "--push needs --registry REGISTRY/NAMESPACE (or RIF_REGISTRY)")
    todo = jobs.matrix_jobs(matrix, cell, None, _source(wheelhouse_dir, locks))
    target = _target(registry, insecure_hosts) if push and registry else None
    _run(todo, pipeline.Options(_source(wheelhouse_dir, locks), validate, gpu, target), progress, report,
         registry if target else None)


@app.command()
@handles_errors
def publish(matrix: MatrixOpt = Path("matrix.yaml"), registry: RegistryOpt = None, insecure: InsecureOpt = None,
            cell: CellOpt = None,
            match: MatchOpt = None, wheelhouse_dir: WheelhouseOpt = None, locks: LocksOpt = None, gpu: GpuOpt = False,
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
            quiet: QuietOpt = False, progress: ProgressOpt = Progress.auto,
            ) -> None:
    """Publish what changed: build, validate, push under an immutable tag, then move the cells' tags."""
    insecure_hosts = check_insecure(insecure)
    if dry_run:
        show.err.print("warning: --dry-run is deprecated: it means --plan (builds nothing); "
                       "--no-push builds and validates without pushing", soft_wrap=True)
        plan = True
    if plan and no_push:
        raise usage_error("--no-push", "--plan builds nothing and --no-push builds: pass one of them")
    if not registry:
        raise usage_error("--registry", "needs REGISTRY/NAMESPACE (or RIF_REGISTRY)")
    todo = jobs.matrix_jobs(matrix, cell, match, _source(wheelhouse_dir, locks))
    options = pipeline.Options(_source(wheelhouse_dir, locks), True, gpu, _target(registry, insecure_hosts),
                               skip_published=True, plan=plan, no_push=no_push, compression=_compression(compression),
                               cache=_cache(cache_registry, insecure_hosts))
    _run(todo, options, progress, record_path, registry)


@app.command()
@handles_errors
def push(images: Annotated[list[str], typer.Argument(help="Local images built by builder.")],
         registry: RegistryOpt = None, insecure: InsecureOpt = None, gpu: GpuOpt = False,
         report: Annotated[Path | None, typer.Option("--report", help="Write the JSON run record here.")] = None,
         progress: ProgressOpt = Progress.auto,
         ) -> None:
    """Validate, then push existing images under their immutable tag and move their cell tag to it."""
    insecure_hosts = check_insecure(insecure)
    if not registry:
        raise usage_error("--registry", "needs REGISTRY/NAMESPACE")
    client = connect()
    todo = [jobs.job_for_image(client, image) for image in images]
    _run(todo, pipeline.Options(gpu=gpu, target=_target(registry, insecure_hosts)), progress, report, registry)


@app.command("test")
@handles_errors
def test_cmd(image: Annotated[str, typer.Argument(help="Image reference to validate.")],
             matrix: Annotated[Path | None, typer.Option("--matrix", "-m", help=(
                 "Hold the image to its cell in this matrix (found by tag); default: the cell baked into it."))]
             = None, wheelhouse_dir: WheelhouseOpt = None, gpu: GpuOpt = False,
             ) -> None:
    """Validate an existing image: the testinfra suite, then the in-image smoke test."""
    plans = plan_images(load_matrix(matrix)) if matrix is not None else None
    client = connect()
    job = jobs.job_for_image(client, image, plans, _source(wheelhouse_dir))
    result = pipeline.run_image(client, job, pipeline.Options(gpu=gpu))
    show.print_checks(image, result.validation)
    if result.failed:
        show.print_failed_checks(image, result.validation)
    raise typer.Exit(EXIT_FAILED if result.failed else EXIT_OK)


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
        show.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from exc
    show.out.print(f"imported {safe(ref)}")


@app.command("prune")
@handles_errors
def prune_cmd(dry_run: Annotated[bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")]
              = False,
              image: Annotated[str | None, typer.Option("--image", metavar="NAME", help=(
                  "Only this image repository (rocm-image-factory/NAME); default: all of them."))] = None) -> None:
    """Remove local content names (<tag>-<hash12>) that a newer build of their tag has superseded."""
    from builder.build import prune

    show.pruned(prune.prune(connect(), dry_run, image), dry_run)


@app.command("lock")
@handles_errors
def lock_cmd(matrix: MatrixOpt = PRODUCTION_MATRIX,
             out_dir: Annotated[Path, typer.Option("--out", help="The build tree whose <combination>/lock/ "
                                                   "files are written (then the tree is rendered from them).")]
             = PRODUCTION_IMAGES,
             update: Annotated[bool, typer.Option("--update", help=(
                 "Resolve every lock again (new wheels, new base digests); without it only missing and stale "
                 "locks are resolved."))] = False,
             wheelhouse_dir: WheelhouseOpt = None,
             base_registry: Annotated[str | None, typer.Option(
                 "--base-registry", metavar="HOST[:PORT]",
                 help="Pin base images from this registry (a mirror of Docker Hub's images) instead of Docker Hub.")]
             = None,
             insecure: InsecureOpt = None,
             ) -> None:
    """Pin every image's inputs without building: the base image by digest, the complete wheel set by sha256."""
    production = matrix.resolve() == PRODUCTION_MATRIX.resolve()
    if out_dir == PRODUCTION_IMAGES and not production:
        raise usage_error("--out", f"only the production matrix is locked into {PRODUCTION_IMAGES}/ (pass --out DIR)")
    cells = load_matrix(matrix)

    def say(group: str, file: str, state: str) -> None:
        if state != "kept":
            show.out.print(f"{state:>9}  {safe(out_dir / group / lockfile.LOCK_DIR / file)}")

    done = lock.lock_tree(cells, out_dir, wheelhouse_dir.resolve() if wheelhouse_dir else None, update,
                          base_registry, check_insecure(insecure), say)
    rendered = render_all(cells, _source(wheelhouse_dir, out_dir))
    imagetree.write(out_dir, rendered, production and out_dir == PRODUCTION_IMAGES, _source(wheelhouse_dir, out_dir))
    show.out.print(f"{len(done.written)} lock files changed, {len(done.kept)} unchanged; rendered {len(rendered)} "
                   f"images into {safe(out_dir)}")


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
        show.error(f"pip download failed ({exc.returncode})")
        raise typer.Exit(EXIT_FAILED) from exc
    show.out.print(f"{len(list(dest.glob('*.whl')))} wheels in {safe(dest)}")


@app.callback()
def _options(show_version: Annotated[bool, typer.Option(
        "--version", callback=show_version, is_eager=True, help="Print the version and exit.")] = False) -> None:
    """Builds, validates and publishes PyTorch images for AMD GPUs (ROCm) from a YAML matrix."""


@app.command("catalog")
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
        show.err.print(f"[yellow]warning:[/yellow] {safe(warning)}")
    show.out.print(f"catalog of {len(catalog.images)} images: {safe(out / 'index.html')}")
    if catalog.warnings:  # a page, a row or a repository left out: the site is written, and incomplete
        show.error(f"{len(catalog.warnings)} thing(s) left out of the catalog: see the warnings above")
        raise typer.Exit(EXIT_FAILED)


@app.command("diff")
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
        show.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    found = diff.diff(a.packages, b.packages)
    if as_json:
        print(json.dumps(diff.as_json(a, b, found), indent=2))
    else:
        show.print_diff(a, b, found)
    lost = a.warnings + b.warnings  # components of no readable shape: the diff is printed, and incomplete
    for warning in lost:
        show.err.print(f"[yellow]warning:[/yellow] {safe(warning)}")
    raise typer.Exit(EXIT_FAILED if lost else EXIT_OK)


@app.command("reproduce")
@handles_errors
def reproduce_cmd(image: Annotated[str, typer.Argument(metavar="REF", help="REGISTRY/NS/REPO:TAG or ...@sha256:HEX")],
                  matrix: MatrixOpt = PRODUCTION_MATRIX, wheelhouse_dir: WheelhouseOpt = None, locks: LocksOpt = None,
                  insecure: InsecureOpt = None, progress: ProgressOpt = Progress.auto,
                  ) -> None:
    """Rebuild a published image from this repository without BuildKit's cache and compare it byte for byte.

    Exit 0 when the rebuild's manifest digest is the published one; 1 when it differs (the first differing
    layer and its files are named) or cannot be rebuilt; 2 for a bad reference.
    """
    from builder.audit import diff, reproduce
    from builder.registry import credentials
    from builder.registry.client import RegistryClient

    ref = diff.parse_ref(image, "REF")
    api = RegistryClient(ref.registry, credentials.lookup(ref.registry), insecure=check_insecure(insecure))
    source = _source(wheelhouse_dir, locks)

    def rebuild(tag: str, content_hash: str, layout: Path, compression: str) -> str:
        [job] = jobs.matrix_jobs(matrix, [tag], None, source)
        if job.content_hash != content_hash:
            raise reproduce.ReproduceError(
                f"{ref} was built from other inputs (content hash {content_hash}) than {matrix} and this checkout "
                f"give {tag} ({job.content_hash}): check out the commit that published it")
        view = RunView([job.tag], progress.value, console=show.err)
        with terminates(), view.running():
            built = pipeline.rebuild(job, source, layout, compression, view.events())
        if not built.ok or built.manifest_digest is None:
            raise reproduce.ReproduceError(f"{tag}: the rebuild failed: {built.error}")
        return built.manifest_digest

    try:
        verdict = reproduce.check(str(ref), ref.repository, ref.reference, api, rebuild)
    except reproduce.ReproduceError as exc:
        show.error(str(exc))
        raise typer.Exit(EXIT_FAILED) from None
    for line in verdict.lines():
        print(line)
    raise typer.Exit(EXIT_OK if verdict.identical else EXIT_FAILED)


@app.command("which")
@handles_errors
def which_cmd(matrix: MatrixOpt = Path("matrix.yaml"),
              gfx: Annotated[list[str] | None, typer.Option(
                  "--gfx", metavar="TARGET", help="Skip detection: a GPU of this target, as rocminfo names it "
                                                  "(Name: gfx1100); repeatable.")] = None,
              rocm: Annotated[str | None, typer.Option("--rocm", metavar="X.Y", help="Only this ROCm line.")] = None,
              os_name: Annotated[str | None, typer.Option("--os", metavar="NAME", help="Only this OS, e.g. "
                                                                                       "ubuntu-24.04.")] = None,
              flavor: Annotated[str | None, typer.Option("--flavor", metavar="runtime|devel", help="Only this flavor.")]
              = None,
              registry: Annotated[str | None, typer.Option(
                  "--registry", envvar="RIF_REGISTRY", metavar="HOST/NS",
                  help="Where the images are published (env RIF_REGISTRY); default: the local name builder build "
                       "gives them.")] = None,
              as_json: Annotated[bool, typer.Option("--json", help="Print the answer as JSON.")] = False,
              root: Annotated[Path, typer.Option(
                  "--root", "--sysfs", metavar="DIR",
                  help="Read sys/, dev/ and etc/group under DIR instead of / (a recorded host).")] = Path("/"),
              ) -> None:
    """Which image runs this host's AMD GPUs, and its docker run line (reads /sys and /dev; runs nothing)."""
    from builder import which

    answer = which.recommend(matrix, root, gfx, rocm, os_name, flavor, registry)
    show.print_which(answer, as_json)
    raise typer.Exit(answer["exit_code"])


def main() -> None:
    os.environ.setdefault("DOCKER_BUILDKIT", "0")
    command = typer.main.get_command(app)
    flags_as_flags(command)
    sys.exit(command(prog_name="builder"))
