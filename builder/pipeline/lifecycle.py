"""The one image lifecycle: render -> bake -> validate -> push (immutable tag) -> move tags; and the image's record.

`builder build`, `builder push` and `builder publish` all run every image through `run_image`; they differ
only in their Options (builder.pipeline.options: a bake's, validation's and a push's; publish adds the
skip-by-content-hash decision); their Jobs come from `jobs`. The build stage bakes every image that needs building
(builder.pipeline.baking: shared stages are built once); then each image goes through its own steps
(builder.pipeline.steps: validation, SBOM) and push (builder.publish.promote). Each step returns a small frozen
result; this module alone assembles the image's ImageReport from them, one frozen record per result, so an
interrupted run records what was assembled so far. A failure fails that image and the next image goes on; an image
is pushed only after its own validation passed, and its moving tags move only after its immutable tag holds exactly
that image.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

from builder.buildkit.bake import BuildResult
from builder.buildkit.export import Cache
from builder.core import tags
from builder.core.safefs import OutputError
from builder.pipeline import baking, byfamily, steps
from builder.pipeline.baking import QUIET, Events
from builder.pipeline.jobs import Job
from builder.pipeline.options import BakeOptions, Options, PushOptions
from builder.pipeline.steps import content_ref
from builder.publish import planner, record
from builder.publish.promote import compressed_size
from builder.publish.record import (
    Attached,
    Built,
    Failed,
    ImageReport,
    Inventoried,
    Promoted,
    Pushed,
    Result,
    Stage,
    Validated,
)
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError

__all__ = ["Cache", "Events", "Options", "Prepared", "assemble", "plan_records", "planned", "prepare", "run",
           "run_and_record", "run_image"]

SKIPPED = ("skipped", "would-skip")


@dataclass
class Prepared:
    """What the run learnt before the images' own lifecycles: which were published, which were baked."""

    published: dict[str, Manifest | None] = field(default_factory=dict)  # tag -> its immutable manifest
    built: dict[str, BuildResult] = field(default_factory=dict)  # tag -> the bake's result
    errors: dict[str, RegistryError] = field(default_factory=dict)  # tag -> why it could not be looked up


@dataclass(frozen=True)
class _Unchanged:
    """The content is published under its immutable tag already (rehearsal: --no-push)."""

    rehearsal: bool


def run(client: docker.DockerClient, jobs: list[Job], options: Options, events: Events = QUIET,
        reports: list[ImageReport] | None = None) -> list[ImageReport]:
    """Every job in turn; reports (when given) holds each image's record as far as it is assembled, so an
    interrupted run can be recorded."""
    done = reports if reports is not None else []
    if options.push is not None and jobs:
        options.push.target.preflight(jobs[0].repository, write=not options.push.no_push)
    between = byfamily.Waves(client, options.bake.buildkit, options.bake.cache)
    for wave in byfamily.waves(jobs) if options.bake.by_family else [jobs]:
        prepared = prepare(client, wave, replace(options.bake, cache=between.before(done)), events, options.push)
        between.after(wave, {tag for tag, result in prepared.built.items() if result.ok}, done)
        for job in wave:
            done.append(planned(job))
            done[-1] = run_image(client, job, options, prepared, events, keep=lambda r: done.__setitem__(-1, r))
    return done


def prepare(client: docker.DockerClient, jobs: list[Job], bake: BakeOptions, events: Events = QUIET,
            push: PushOptions | None = None) -> Prepared:
    """The build stage for all jobs at once: look up what is published, then one bake of what is left."""
    prepared = Prepared()
    wanted = []
    skip = push is not None and push.skip_published
    for job in jobs:
        if push is not None and skip:
            try:
                found = prepared.published[job.tag] = push.target.published(job.repository, job.immutable_tag,
                                                                            job.content_hash)
            except RegistryError as exc:  # the image's own failure, reported by its lifecycle
                prepared.errors[job.tag] = exc
                continue
            if found is not None:
                continue
        if job.rendered is None or (skip and _has_image(client, content_ref(job), job.content_hash)):
            continue  # nothing to build, or a rerun after a failed push finds its own build
        wanted.append(job)
    if wanted:
        prepared.built = baking.bake_jobs(wanted, bake, events)
    return prepared


def run_and_record(client: docker.DockerClient, jobs: list[Job], options: Options, events: Events,
                   record_path: Path | None,
                   registry: str | None) -> tuple[list[ImageReport], OutputError | None]:
    """run(), and the run record written whatever happens: images never reached are `not-attempted`; a record
    that could not be written comes back beside the reports, so the run's summary is still printed."""
    reports: list[ImageReport] = []
    finished = False
    unwritten = None
    try:
        run(client, jobs, options, events, reports)
        finished = True
    finally:
        done = {r.tag for r in reports}
        reports.extend(replace(planned(job), state="not-attempted") for job in jobs if job.tag not in done)
        if record_path is not None:
            try:
                record.write(record_path, reports, registry, finished)
            except OutputError as exc:
                unwritten = exc
    return reports, unwritten


def run_image(client: docker.DockerClient, job: Job, options: Options, prepared: Prepared | None = None,
              events: Events = QUIET, keep: Callable[[ImageReport], None] = lambda report: None) -> ImageReport:
    """The job's steps in order, its record assembled from their results (each handed to keep as it is made); the
    first failure ends them."""
    report = planned(job)
    start = time.monotonic()
    try:
        found = prepared or prepare(client, [job], options.bake, events, options.push)
        with contextlib.closing(_steps(client, job, options, found, events)) as results:
            for result in results:
                report = assemble(report, result)
                keep(report)
                if report.failed:
                    break
    except RegistryError as exc:  # AuthError included: the message names registry and user, never the secret
        report = _registry_failure(report, str(exc))
    report = replace(report, seconds=round(time.monotonic() - start, 3))
    keep(report)
    return report


def _steps(client: docker.DockerClient, job: Job, options: Options, prepared: Prepared,
           events: Events) -> Generator[Result | _Unchanged, None, None]:
    """The job's steps, each result handed on as it comes (run_image stops at the first failure)."""
    push = options.push

    def stage(name: str) -> None:
        events.stage(job.tag, name)

    if job.tag in prepared.errors:
        raise prepared.errors[job.tag]
    published = prepared.published.get(job.tag) if push is not None and push.skip_published else None
    if push is not None and published is not None:
        yield from _unchanged(client, job, push, published, stage)
        return
    baked = prepared.built.get(job.tag)
    built = steps.take_build(client, job, baked)
    yield built
    if built.image_id is None:
        return
    validated = None
    if options.validate is not None:
        validated = steps.validate(client, job, built.image_id, options.validate, stage)
        yield validated
    if push is None:
        return
    facts = validated.facts if validated is not None else None
    inventory = steps.make_sbom(client, job, built.image_id, stage, facts) if push.sbom else None
    if inventory is not None:
        yield inventory
    if push.no_push:
        return  # --no-push: built, validated and inventoried; the registry is never written to
    stage("push")
    cache = options.bake.cache
    pushed = push.target.push(client, built.image_id, job.repository, immutable_tag=job.immutable_tag,
                              content_hash=job.content_hash, cache=cache.ref if cache else None,
                              blobs=baked.blobs if baked else (), cache_tag=baked.target if baked else None)
    yield pushed
    if pushed.manifest is None:
        return
    # Before any tag moves: a moving tag always names an image whose SBOM is attached.
    if isinstance(inventory, Inventoried):
        yield steps.attach(job, push.target, pushed.manifest, inventory.sbom, stage)
    yield from steps.attach_lock(job, push.target, pushed.manifest, stage)
    yield push.target.promote(job.repository, job.tags, pushed.manifest, own=job.tag, on_stage=stage)


def _unchanged(client: docker.DockerClient, job: Job, push: PushOptions, published: Manifest,
               stage: Callable[[str], None]) -> Generator[Result | _Unchanged, None, None]:
    """Content published before: its missing attachments repaired, its tags moved (a rehearsal only says so)."""
    rehearsal = push.no_push
    yield _Unchanged(rehearsal)
    if not rehearsal:
        if push.sbom:
            yield from steps.repair_sbom(client, job, push.target, published, stage)
        yield from steps.repair_lock(job, push.target, published, stage)
        yield Pushed(manifest=published, pushed_bytes=0)  # unchanged: no layer goes up again
    yield push.target.promote(job.repository, job.tags, published, own=job.tag, dry_run=rehearsal, on_stage=stage)


def planned(job: Job) -> ImageReport:
    """The record of an image before any step: its names."""
    return ImageReport(tag=job.tag, repository=job.repository, tags=tuple(job.tags), immutable_tag=job.immutable_tag,
                       content_hash=job.content_hash, local_image=job.local_image)


def assemble(report: ImageReport, result: Result | _Unchanged) -> ImageReport:
    """The record with one more step's result in it."""
    match result:
        case _Unchanged(rehearsal=rehearsal):
            return replace(report, state="would-skip" if rehearsal else "skipped")
        case Built():
            report = replace(report, image_id=result.image_id, image_bytes=result.image_bytes,
                             loaded_bytes=result.loaded_bytes, build_seconds=result.seconds,
                             log_tail=result.log_tail, state="built")
            return _failed(report, "build", result.failure) if result.failure else report
        case Validated():
            report = replace(report, validation=result.checks, validate_seconds=result.seconds,
                             validation_reused=result.reused)
            if result.failure:
                return _failed(report, "validate", result.failure)
            return replace(report, state="validated", packages=result.packages)
        case Inventoried():
            return replace(report, image_id=result.image_id, sbom_digest=result.sbom.digest,
                           sbom_packages=len(result.sbom.packages))
        case Pushed():
            report = replace(report, pushed=result.uploaded, pushed_bytes=result.pushed_bytes,
                             digest=result.digest or report.digest)
            return _registry_failure(report, result.failure) if result.failure else report
        case Attached(kind="sbom"):
            return replace(report, sbom_digest=result.sbom_digest, sbom_artifact=result.artifact)
        case Attached():
            return replace(report, lock_artifact=result.artifact)
        case Promoted():
            report = replace(report, digest=result.digest, compressed_bytes=result.compressed_bytes,
                             previous_digest=result.previous_digest, moved=result.moved,
                             state=report.state if report.state in SKIPPED else "published")
            return _registry_failure(report, result.failure) if result.failure else report
        case Failed():
            return _failed(replace(report, digest=result.digest or report.digest), result.stage, result.why)


def _failed(report: ImageReport, stage: Stage, why: str) -> ImageReport:
    return replace(report, state="failed", failed_stage=stage, failure=why)


def _registry_failure(report: ImageReport, why: str) -> ImageReport:
    """A registry refusal: the push's once the image is here, else the look-up's."""
    stage: Stage = "push" if report.image_id else "registry"
    return _failed(report, stage, f"{stage}: {why}")


def plan_records(decisions: list[planner.Decision[Job]], moved: bool = False) -> list[ImageReport]:
    """A plan's decisions as run records (states would-build / would-skip; skipped once the tags were moved)."""
    out = []
    for d in decisions:
        report = planned(d.job)
        if d.action == "error":
            report = _failed(report, "registry", f"registry: {d.reason}")
        elif d.action == "build":
            report = replace(report, state="would-build", moved=tuple(d.job.tags))
        else:
            report = replace(report, state="skipped" if moved else "would-skip",
                             moved=tuple(d.moved if moved else d.moves))
        if d.manifest is not None:
            report = replace(report, digest=d.manifest.digest, compressed_bytes=compressed_size(d.manifest.body))
        out.append(report)
    return out


def _has_image(client: docker.DockerClient, ref: str, content_hash: str) -> bool:
    try:
        labels = client.images.get(ref).labels or {}
    except (ImageNotFound, DockerException):
        return False
    return labels.get(tags.HASH_LABEL) == content_hash
