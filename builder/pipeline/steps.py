"""One image's own steps after the bake: take its image, validate it, inventory it (SBOM), attach the SBOM and, for
a locked image, the lock it was built from.

Each step returns a small frozen result (builder.publish.record: its digests, figures and verdict) and writes no
record: builder.pipeline.lifecycle assembles the image's record from them and decides what runs next (a failure
fails this image only). `stage` tells the display which step the image is in.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import docker
from docker.errors import DockerException, ImageNotFound

from builder.buildkit.bake import BuildResult
from builder.buildkit.engine import installed_bytes, side_by_side
from builder.core import tags
from builder.pipeline.jobs import Job
from builder.pipeline.options import ValidateOptions
from builder.publish.promote import Target
from builder.publish.record import Attached, Built, Failed, Inventoried, Result, Stage, Validated
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError
from builder.render import lockrecord
from builder.validate import apptainer, reuse, sbom
from builder.validate.runner import ValidationResult, validate_image

HASH_MISMATCH = "DO NOT MATCH THE HASHES"  # pip's words when --require-hashes refuses a wheel
LOCK_BROKEN = ("a wheel does not match the hashes in the lock (pip --require-hashes): the wheelhouse or index now "
               "serves other bytes under a locked name and version; nothing was pushed. If the new wheel is wanted, "
               "`builder lock --update` pins it")


def content_ref(job: Job) -> str:
    """The local name that holds one content (bake tags it): no other run moves it elsewhere."""
    return tags.local_ref(job.repository, tags.immutable_tag(job.tag, job.content_hash))


def take_build(client: docker.DockerClient, job: Job, built: BuildResult | None) -> Built:
    """The bake's image for the job, or the one it names; failure: there is none to go on with."""
    if built is None:  # not baked: an image already in the engine (builder push/test, or a rerun's own build)
        return _existing(client, job.local_image if job.rendered is None else content_ref(job))
    if not built.ok:
        hash_mismatch = any(HASH_MISMATCH in line for line in built.log_tail)
        return Built(seconds=built.seconds, log_tail=tuple(built.log_tail),
                     failure=f"build: {LOCK_BROKEN if hash_mismatch else built.error}")
    return Built(image_id=built.image_id, image_bytes=_size(client, built.image_id),
                 loaded_bytes=built.streamed_bytes, seconds=built.seconds, log_tail=tuple(built.log_tail))


def _existing(client: docker.DockerClient, ref: str | None) -> Built:
    try:
        image = client.images.get(ref or "")
    except (ImageNotFound, DockerException) as exc:
        return Built(failure=f"build: no local image {ref}: {exc}")
    return Built(image_id=image.id, image_bytes=installed_bytes(client, str(image.id)))


def validate(client: docker.DockerClient, job: Job, image_id: str, options: ValidateOptions,
             stage: Callable[[str], None]) -> Validated:
    """The image's checks under Docker and, opted in, under Apptainer (only once it passed under Docker). What is in
    the image (the SBOM's facts, the record's package list) is read beside them, from a container of its own."""
    stage("validate")
    began = time.monotonic()
    result, facts, reused = _under_docker(client, job, image_id, options)
    seconds = time.monotonic() - began if reused else result.seconds
    verdict = ValidationResult(image_id, list(result.checks))  # a list of its own: a kept pass is never added to
    if options.apptainer and result.ok:
        stage("apptainer")
        start = time.monotonic()
        verdict.checks += apptainer.run_apptainer(client, image_id)
        seconds += time.monotonic() - start
    if not verdict.ok:
        return Validated(checks=tuple(verdict.checks), seconds=round(seconds, 3), failure="validation", reused=reused)
    packages = sbom.python_packages(facts) if isinstance(facts, dict) else []
    return Validated(checks=tuple(verdict.checks), seconds=round(seconds, 3), packages=tuple(packages), facts=facts,
                     reused=reused)


def _under_docker(client: docker.DockerClient, job: Job, image_id: str, options: ValidateOptions,
                  ) -> tuple[ValidationResult, dict[str, Any] | str, str | None]:
    """The checks and the SBOM's facts, and when they ran if they were taken from a pass on record for the same
    image, expectations, checks and engine (options.reuse; never with --gpu). A pass run here is kept."""
    keys = [] if options.gpu else reuse.keys_of(client, image_id, job.expect, job.labels)
    kept = reuse.find(keys[0], image_id) if keys and options.reuse else None
    if kept is not None:
        return kept.result, kept.facts, kept.validated_at
    result, facts = side_by_side(client, lambda: validate_image(client, image_id, job.expect, job.labels,
                                                                gpu=options.gpu),
                                 lambda: _facts(client, image_id))
    reuse.keep(keys, image_id, result, facts)
    return result, facts, None


def make_sbom(client: docker.DockerClient, job: Job, image_id: str, stage: Callable[[str], None],
              facts: dict[str, Any] | str | None = None) -> Inventoried | Failed:
    """The SBOM of the validated image, from the facts validation read (a container of it) or, without them, from a
    container of its own; Failed when it cannot say."""
    stage("sbom")
    name = f"{job.repository}:{job.immutable_tag}"
    try:
        if isinstance(facts, str):
            raise sbom.SbomError(facts)
        document = sbom.generate(client, image_id, name) if facts is None else sbom.from_facts(facts, image_id, name)
    except sbom.SbomError as exc:
        return Failed(stage="sbom", why=f"sbom: {exc}")
    return Inventoried(image_id=image_id, sbom=document)


def attach(job: Job, target: Target, manifest: Manifest, document: sbom.Sbom,
           stage: Callable[[str], None]) -> Attached | Failed:
    stage("attach sbom")
    return _attached(job, target, manifest, "sbom", "the SBOM",
                     lambda: target.attach_sbom(job.repository, manifest, document))


def _attached(job: Job, target: Target, manifest: Manifest, kind: Stage, what: str,
              put: Callable[[], Attached]) -> Attached | Failed:
    """put() attaches an artifact to the pushed manifest before any tag moves; a registry error fails the image at
    stage kind, saying that a rerun attaches it."""
    try:
        return put()
    except RegistryError as exc:
        where = f"{target.api.address}/{target.repository(job.repository)}@{manifest.digest}"
        return Failed(stage=kind, digest=manifest.digest,
                      why=f"{kind}: cannot attach {what} to {where} (pushed under {job.immutable_tag}; no tag moved; "
                          f"a rerun attaches it): {exc}")


def repair_sbom(client: docker.DockerClient, job: Job, target: Target, published: Manifest,
                stage: Callable[[str], None]) -> Iterator[Result]:
    """A published image without an SBOM (a run whose attach failed): attach one before its tags move, made from
    the local image when it is exactly the published one (same manifest digest). Nothing when it has one or
    nothing here can make it (the record then has no sbom_artifact)."""
    if target.has_sbom(job.repository, published):
        return
    try:
        local = client.images.get(content_ref(job)).id
    except (ImageNotFound, DockerException):
        return
    if local != published.digest:
        return
    made = make_sbom(client, job, local, stage)
    yield made
    if isinstance(made, Inventoried):
        yield attach(job, target, published, made.sbom, stage)


def attach_lock(job: Job, target: Target, manifest: Manifest, stage: Callable[[str], None]) -> Iterator[Result]:
    """A locked image's lock files, attached to its manifest before its tags move (builder reproduce rebuilds from
    them); nothing for an unlocked image."""
    if job.rendered is None or not job.rendered.lock_files:
        return
    stage("attach lock")
    recorded = lockrecord.Recorded(dict(job.rendered.lock_files))
    yield _attached(job, target, manifest, "push", "the lock record",
                    lambda: target.attach_lock(job.repository, manifest, recorded))


def repair_lock(job: Job, target: Target, published: Manifest, stage: Callable[[str], None]) -> Iterator[Result]:
    """A published locked image without its lock record (a run whose attach failed, or one before records): the
    same content hash means the same locked inputs, so this render's lock files are the ones it was built from."""
    if job.rendered is None or not job.rendered.lock_files \
            or target.has_referrer(job.repository, published, lockrecord.MEDIA_TYPE):
        return
    yield from attach_lock(job, target, published, stage)


def _facts(client: docker.DockerClient, image_id: str) -> dict[str, Any] | str:
    """The SBOM's facts of the image, or why they cannot be read (the SBOM step fails with it; the record's package
    list is then empty)."""
    try:
        return sbom.inspect(client, image_id)
    except sbom.SbomError as exc:
        return str(exc)


def _size(client: docker.DockerClient, image_id: str | None) -> int | None:
    """Installed (unpacked) bytes: the compressed size is the registry's, read from the manifest on push."""
    return installed_bytes(client, image_id) if image_id else None
