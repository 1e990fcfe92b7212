"""The build tree's inputs and files: `render` (Dockerfiles and bake file), `lock` (pins), `wheelhouse` (wheels)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from builder.cli import console
from builder.cli.kit import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    PRODUCTION_IMAGES,
    PRODUCTION_MATRIX,
    CellOpt,
    InsecureOpt,
    MatrixOpt,
    WheelhouseOpt,
    handles_errors,
    wheel_source,
)
from builder.core import safefs
from builder.core.errors import usage_error
from builder.core.text import safe
from builder.matrix.expand import load_matrix
from builder.matrix.selection import select
from builder.registry.address import check_insecure, check_registry
from builder.render import imagetree, lockcache, lockfile, oslock, resolve, wheelhouse
from builder.render.dockerfile import RenderedCell, render_all


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
    source = wheel_source(wheelhouse_dir, locks)
    rendered = render_all(load_matrix(matrix), source)
    warn_unpinned(rendered)
    if not check:
        imagetree.write(out_dir, rendered, prune or (production and out_dir == PRODUCTION_IMAGES), source)
        groups = len({r.group for r in rendered})
        console.out.print(f"wrote {len(rendered)} images in {groups} Dockerfiles and "
                       f"{safe(out_dir / imagetree.BAKE_FILE)}")
        return
    problems = imagetree.drift(out_dir, rendered)
    for p in problems:
        console.err.print(f"[red]drift:[/red] {safe(p)}")
    if problems:
        console.err.print("run `builder render` and commit the result")
        raise typer.Exit(EXIT_FAILED)
    console.out.print(f"{len(rendered)} images in {safe(out_dir)} match the template and matrix")


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
             check_data: Annotated[bool, typer.Option("--check-data", help=(
                 "Resolve every image's wheels and base as --update would, write nothing, and exit 1 if any cannot be "
                 "resolved (a data error: the data promises what the index or registry does not serve)."))] = False,
             data_errors: Annotated[Path | None, typer.Option("--data-errors", metavar="FILE", help=(
                 "Also write the data errors as a Markdown list to FILE (empty when there are none), for the lock "
                 "refresh's pull request."))] = None,
             apt_snapshot: Annotated[str | None, typer.Option(
                 "--apt-snapshot", metavar="URL|off", envvar=oslock.URL_ENV, help=(
                     "Pin OS packages from this snapshot mirror for every OS (URL/TIMESTAMP/dists/CODENAME/main), "
                     "not the OS's snapshot service (builder/data/os.yaml); off: leave OS packages unpinned."))]
             = None,
             apt_snapshot_time: Annotated[str | None, typer.Option(
                 "--apt-snapshot-time", metavar="YYYYMMDDTHHMMSSZ", envvar=oslock.TIME_ENV, help=(
                     "The snapshot to pin OS packages at (default: the lock's own; with --update, now)."))] = None,
             index_cache: Annotated[Path | None, typer.Option("--index-cache", metavar="DIR", help=(
                 "Remember each pip step's answer and the index pages it came from in DIR; next time a step whose "
                 "pages all answer 304 Not Modified is not resolved again (lock-refresh.yml keeps DIR between "
                 "nights)."))] = None,
             jobs: Annotated[int, typer.Option("--jobs", metavar="N", min=1, max=64, help=(
                 "Resolve this many combinations at once (each one's steps in order)."))] = 8,
             ) -> None:
    """Pin every image's inputs without building: the base image by digest, the complete wheel set by sha256.

    Every OS package of its apt steps is pinned by version from a dated archive snapshot (lock/os-*.txt).

    A step no index or registry resolves is a data error of the images that need it: each is reported (cells,
    index, what was missing), every other lock is refreshed anyway, those images are left out of the render, and
    the command exits 1."""
    production = matrix.resolve() == PRODUCTION_MATRIX.resolve()
    if out_dir == PRODUCTION_IMAGES and not production:
        raise usage_error("--out", f"only the production matrix is locked into {PRODUCTION_IMAGES}/ (pass --out DIR)")
    if data_errors is not None:
        safefs.check_named(data_errors, "the data errors (--data-errors)")
    if base_registry is not None:
        base_registry = check_registry(base_registry, "--base-registry")
    cells = load_matrix(matrix)
    snapshot = oslock.Snapshot.from_options(apt_snapshot, apt_snapshot_time, os.environ.get(oslock.TRUSTED_ENV))

    def say(group: str, file: str, state: str) -> None:
        if state != "kept":
            console.out.print(f"{state:>9}  {safe(out_dir / group / lockfile.LOCK_DIR / file)}")

    cache = lockcache.LockCache(index_cache) if index_cache is not None else None
    done = resolve.lock_tree(cells, out_dir, wheelhouse_dir.resolve() if wheelhouse_dir else None,
                          update or check_data, base_registry, check_insecure(insecure), say, write=not check_data,
                          snapshot=snapshot, workers=jobs, cache=cache)
    if cache is not None:
        console.out.print(f"index cache: {len(cache.reused)} steps reused (their pages unchanged: "
                          f"{cache.checks.requests} conditional requests), {len(cache.resolved)} resolved by pip; "
                          f"{cache.prune()} expired entries removed")
    unwritten = _report_data_errors(done.errors, data_errors)
    if check_data:
        console.out.print(f"{len(done.written) + len(done.kept)} locks resolved, {len(done.errors)} data errors")
        _refuse(unwritten)
        if done.errors:
            raise typer.Exit(EXIT_FAILED)
        return
    failed = done.failed_cells  # their images have no lock to render from: left out, and listed above
    cells = [c for c in cells if c.content_cell().tag not in failed and c.tag not in failed]
    rendered = render_all(cells, wheel_source(wheelhouse_dir, out_dir))
    warn_unpinned(rendered)
    imagetree.write(out_dir, rendered, production and out_dir == PRODUCTION_IMAGES,
                    wheel_source(wheelhouse_dir, out_dir))
    console.out.print(f"{len(done.written)} lock files changed, {len(done.kept)} unchanged; rendered {len(rendered)} "
                   f"images into {safe(out_dir)}")
    _refuse(unwritten)
    if done.errors:
        raise typer.Exit(EXIT_FAILED)


def warn_unpinned(rendered: list[RenderedCell]) -> None:
    """Say (stderr) which combinations install OS packages at whatever the live archive serves today."""
    groups = sorted({r.group for r in rendered if not r.os_pinned})
    if groups:
        console.err.print(f"[yellow]warning:[/yellow] the OS layer of {len(groups)} combinations is unpinned (no "
                          f"lock/os-*.txt; `builder lock` pins it): {safe(', '.join(groups))}", soft_wrap=True)


def _report_data_errors(errors: list[resolve.DataError], markdown: Path | None) -> safefs.OutputError | None:
    """Each error on stderr, and (for the pull request) as a Markdown list; a list that cannot be written (a full
    disk) comes back, said once the locks and the tree are written."""
    for e in errors:
        console.err.print(f"[red]data error:[/red] {safe(e.line())}", soft_wrap=True)
    if markdown is not None:
        lines = [f"- `{'`, `'.join(e.cells)}`: `{e.step}` from {e.index}: {e.missing}\n" for e in errors]
        try:
            safefs.write_named(markdown, "".join(lines).encode(), "the data errors (--data-errors)")
        except safefs.OutputError as exc:
            return exc
    return None


def _refuse(unwritten: safefs.OutputError | None) -> None:
    if unwritten is not None:
        console.error(str(unwritten))
        raise typer.Exit(EXIT_BAD_INPUT)


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
        console.error(f"pip download failed ({exc.returncode})")
        raise typer.Exit(EXIT_FAILED) from exc
    console.out.print(f"{len(list(dest.glob('*.whl')))} wheels in {safe(dest)}")
