"""One GPU family at a time, for a runner whose disk cannot hold a whole row (`builder publish --by-family`).

A row's images share their base and torch layers; each family adds its own device layer. Baked all at once, a
row's every device layer is on the disk together, three times (BuildKit's snapshots, the engine's content and its
unpacked images). In family waves (`Waves`), a family's images are baked, validated and pushed. Before the next
family's bake, the previous family's images go but its runtime images (`anchors`: they hold the shared layers,
which are then never fetched or unpacked again), and, when the run writes a registry cache, every BuildKit record
of the factory's steps with them (its second copy of the layers the images hold, the download caches): the bake
takes the shared stages from the cache the previous bake exported, whose blobs the anchors hold. Once the family's
images are in, the anchors go, with the records not used since the bake began and pip's download cache. Only the
factory's own records are pruned, never another build's cache (builder.buildkit.records).
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from dataclasses import dataclass, field, replace

import docker
from docker.errors import DockerException

from builder.buildkit import records
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Cache
from builder.pipeline.jobs import Job
from builder.pipeline.steps import content_ref
from builder.publish.record import ImageReport
from builder.render.sources import PIP_CACHE_ID

DONE = frozenset({"published", "skipped"})  # done for good; a failed image stays for a rerun to find


def waves(jobs: list[Job]) -> list[list[Job]]:
    """The jobs by GPU family, in the order the families first come (a family's runtime and devel together);
    images of no family (CPU) are one wave."""
    by_family: dict[str | None, list[Job]] = {}
    for job in jobs:
        by_family.setdefault(job.rendered.cell.gfx if job.rendered is not None else None, []).append(job)
    return list(by_family.values())


def remove_done(client: docker.DockerClient, jobs: list[Job], reports: list[ImageReport]) -> list[str]:
    """Remove the local names of the jobs' images that are done (their layers go with the last image that
    holds them); the names removed."""
    done = {r.tag for r in reports if r.state in DONE}
    removed = []
    for job in jobs:
        if job.tag not in done:
            continue
        for ref in dict.fromkeys([content_ref(job), *([job.local_image] if job.local_image else [])]):
            with contextlib.suppress(DockerException):
                client.images.remove(ref)
                removed.append(ref)
    return removed


def anchors(jobs: list[Job]) -> list[Job]:
    """One image per combination that holds its shared layers (base, torch) until the next family's images do:
    the runtime image, which holds nothing more than its family's own layers (a devel image adds a toolchain)."""
    kept: dict[str, Job] = {}
    for job in jobs:
        group = job.rendered.group if job.rendered is not None else job.tag
        if group not in kept or (_is_runtime(job) and not _is_runtime(kept[group])):
            kept[group] = job
    return list(kept.values())


def _is_runtime(job: Job) -> bool:
    return job.rendered is not None and job.rendered.cell.flavor == "runtime"


@dataclass
class Waves:
    """What happens between family waves. Before a family's bake, the previous family's images go, all but one
    per combination (anchors: the shared layers keep an image holding them, so they are never unpacked or fetched
    again); with a registry cache the run writes to, every record of the factory's steps goes too, and the bake
    imports the cache of the last wave that baked. Once the family's images are in, the anchors go, with BuildKit's
    records of the earlier waves and pip's download cache."""

    client: docker.DockerClient
    kit: BuildKit
    cache: Cache | None  # as the run may use it (write: False under --no-push, so no wave exports one)
    baked: tuple[str, ...] = ()  # the bake targets of the last wave that baked (their cache holds the stages)
    previous: list[Job] = field(default_factory=list)
    anchored: list[Job] = field(default_factory=list)  # the previous wave's images still in the engine
    started: float = 0.0

    def before(self, reports: list[ImageReport]) -> Cache | None:
        """The cache this wave's bake uses, once the disk holds no more of the earlier waves than it needs."""
        self.started = time.monotonic()
        self.anchored = anchors(self.previous)
        remove_done(self.client, [j for j in self.previous if j not in self.anchored], reports)
        if self.cache is None or not self.cache.write or not self.baked:
            return self.cache
        prune_steps(self.kit)
        return replace(self.cache, earlier=self.baked)

    def after(self, wave: list[Job], built: set[str], reports: list[ImageReport]) -> None:
        """This wave's images are in the engine: the previous wave's anchors may go."""
        if self.previous:
            remove_done(self.client, self.anchored, reports)
            prune_cache(self.kit, self.started)
        targets = tuple(j.rendered.target for j in wave if j.rendered is not None and j.tag in built)
        self.baked, self.previous = targets or self.baked, wave


def prune_steps(kit: BuildKit, unused_for: int | None = None) -> bool:
    """Every record of the factory's steps (not used for unused_for seconds, when given), shared with an image or
    not (--all), with their cache mounts: BuildKit's second copy of the layers the engine's images hold, pip's and
    the package manager's downloads. False when they could not be listed or pruned."""
    found = records.listed(kit)
    if found is None:
        return False
    ids = records.ours(found)
    if not ids:
        return True
    return _prune(kit, "--all", "--filter", records.id_filter(ids),
                  *(["--filter", f"until={unused_for}s"] if unused_for else []))


def prune_cache(kit: BuildKit, since: float) -> bool:
    """BuildKit's cache records not used since `since` (time.monotonic()): the earlier waves' own steps; and pip's
    download cache mount, which every wave uses and so never ages, and which would otherwise keep every wheel the
    row downloaded on the disk until its last family (a ROCm row's device wheels: GBs per family). The next family
    downloads what it needs again (a device package two families share, at most). False when buildx could not
    prune (the run goes on: pruning only frees disk)."""
    aged = prune_steps(kit, max(1, round(time.monotonic() - since)))
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
