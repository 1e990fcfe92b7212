"""One GPU family at a time, for a runner whose disk cannot hold a whole row (`builder publish --release`).

A row's images share their base and torch layers; each family adds its own device layer. Baked all at once, a
row's every device layer is on the disk together, three times (BuildKit's snapshots, the engine's content and its
unpacked images). In family waves, a family's images are baked, validated and pushed, and the previous family's
images leave the engine only once this family's are loaded (so the shared layers always have an image holding
them and are never streamed or unpacked again), and BuildKit's cache of the earlier waves' steps is pruned (its
records not used since this wave's bake began: the shared stages this bake reused stay), with pip's download cache.
"""

from __future__ import annotations

import contextlib
import subprocess
import time

import docker
from docker.errors import DockerException

from builder.buildkit.builders import BuildKit
from builder.pipeline.jobs import Job
from builder.pipeline.steps import content_ref
from builder.publish.record import ImageReport
from builder.render.sources import PIP_CACHE_ID

RELEASED = frozenset({"published", "skipped"})  # done for good; a failed image stays for a rerun to find


def waves(jobs: list[Job]) -> list[list[Job]]:
    """The jobs by GPU family, in the order the families first come (a family's runtime and devel together);
    images of no family (CPU) are one wave."""
    by_family: dict[str | None, list[Job]] = {}
    for job in jobs:
        by_family.setdefault(job.rendered.cell.gfx if job.rendered is not None else None, []).append(job)
    return list(by_family.values())


def release(client: docker.DockerClient, jobs: list[Job], reports: list[ImageReport]) -> list[str]:
    """Remove the local names of the jobs' images that are done (their layers go with the last image that
    holds them); the names removed."""
    done = {r.tag for r in reports if r.state in RELEASED}
    removed = []
    for job in jobs:
        if job.tag not in done:
            continue
        for ref in dict.fromkeys([content_ref(job), *([job.local_image] if job.local_image else [])]):
            with contextlib.suppress(DockerException):
                client.images.remove(ref)
                removed.append(ref)
    return removed


def prune_cache(kit: BuildKit, since: float) -> bool:
    """BuildKit's cache records not used since `since` (time.monotonic()): the earlier waves' own steps; and pip's
    download cache mount, which every wave uses and so never ages, and which would otherwise keep every wheel the
    row downloaded on the disk until its last family (a ROCm row's device wheels: GBs per family). The next family
    downloads what it needs again (a device package two families share, at most). False when buildx could not
    prune (the run goes on: pruning only frees disk)."""
    age = max(1, round(time.monotonic() - since))
    aged = _prune(kit, "--filter", f"until={age}s")
    return _prune(kit, "--filter", "type=exec.cachemount", "--filter", pip_cache_filter()) and aged


def pip_cache_filter() -> str:
    """BuildKit describes a cache mount as `cached mount DEST from exec COMMAND with id "/ID"`: the filter takes the
    mount of exactly that ID, never another whose step's command only mentions it (a user's cache is not ours)."""
    return f'description~="with id \\"/{PIP_CACHE_ID}\\"$"'


def _prune(kit: BuildKit, *filters: str) -> bool:
    """One `buildx prune` of the records every filter matches."""
    try:
        done = subprocess.run([*kit.buildx("prune"), "--force", *filters], capture_output=True, check=False,
                              timeout=600)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0
