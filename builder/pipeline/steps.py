"""One image's own steps after the bake: take its image, validate it, inventory it (SBOM), attach the SBOM and, for
a locked image, the lock it was built from.

Each step records its outcome in the image's ImageReport and answers whether the image may go on; a failure
fails this image only (builder.pipeline.lifecycle decides what runs next). `stage` tells the display which step
the image is in.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import docker
from docker.errors import DockerException, ImageNotFound

from builder.buildkit.bake import BuildResult
from builder.buildkit.engine import installed_bytes, run_captured
from builder.core import tags
from builder.pipeline.jobs import Job
from builder.publish.promote import Target
from builder.publish.record import ImageReport, Stage
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError
from builder.render import lockrecord
from builder.validate import apptainer, sbom
from builder.validate.runner import validate_image

HASH_MISMATCH = "DO NOT MATCH THE HASHES"  # pip's words when --require-hashes refuses a wheel
LOCK_BROKEN = ("a wheel does not match the hashes in the lock (pip --require-hashes): the wheelhouse or index now "
               "serves other bytes under a locked name and version; nothing was pushed. If the new wheel is wanted, "
               "`builder lock --update` pins it")


def content_ref(job: Job) -> str:
    """The local name that holds one content (bake tags it): no other run moves it elsewhere."""
    return tags.local_ref(job.repository, tags.immutable_tag(job.tag, job.content_hash))


def take_build(client: docker.DockerClient, job: Job, built: BuildResult | None, report: ImageReport) -> bool:
    """Take the bake's image for the job, or find the one it names; False when there is none to go on with."""
    if built is None:  # not baked: an image already in the engine (builder push/test, or a rerun's own build)
        return _existing(client, job.local_image if job.rendered is None else content_ref(job), report)
    report.build_seconds, report.log_tail = built.seconds, built.log_tail
    if not built.ok:
        hash_mismatch = any(HASH_MISMATCH in line for line in built.log_tail)
        report.fail("build", f"build: {LOCK_BROKEN if hash_mismatch else built.error}")
        return False
    report.image_id, report.state = built.image_id, "built"
    report.image_bytes, report.loaded_bytes = _size(client, built.image_id), built.streamed_bytes
    return True


def _existing(client: docker.DockerClient, ref: str | None, report: ImageReport) -> bool:
    try:
        image = client.images.get(ref or "")
    except (ImageNotFound, DockerException) as exc:
        report.fail("build", f"build: no local image {ref}: {exc}")
        return False
    report.image_id, report.state = image.id, "built"
    report.image_bytes = installed_bytes(client, str(image.id))
    return True


def validate(client: docker.DockerClient, job: Job, gpu: bool, stage: Callable[[str], None],
             report: ImageReport, under_apptainer: bool = False) -> bool:
    """The image's checks under Docker and, opted in, under Apptainer (only once it passed under Docker)."""
    stage("validate")
    assert report.image_id is not None
    result = validate_image(client, report.image_id, job.expect, job.labels, gpu=gpu)
    seconds = result.seconds
    if under_apptainer and result.ok:
        stage("apptainer")
        start = time.monotonic()
        result.checks += apptainer.run_apptainer(client, report.image_id)
        seconds += time.monotonic() - start
    report.validation, report.validate_seconds = result.checks, round(seconds, 3)
    if not result.ok:
        report.fail("validate", "validation")
        return False
    report.state = "validated"
    report.packages = _packages(client, report.image_id)
    return True


def make_sbom(client: docker.DockerClient, job: Job, stage: Callable[[str], None],
              report: ImageReport) -> sbom.Sbom | None:
    """The SBOM of the validated image, from a container of it; None (the image failed) when it cannot say."""
    stage("sbom")
    assert report.image_id is not None
    try:
        document = sbom.generate(client, report.image_id, f"{job.repository}:{report.immutable_tag}")
    except sbom.SbomError as exc:
        report.fail("sbom", f"sbom: {exc}")
        return None
    report.sbom_digest, report.sbom_packages = document.digest, len(document.packages)
    return document


def attach(job: Job, target: Target, manifest: Manifest, document: sbom.Sbom, stage: Callable[[str], None],
           report: ImageReport) -> bool:
    stage("attach sbom")
    return _attached(job, target, manifest, report, "sbom", "the SBOM",
                     lambda: target.attach_sbom(report, manifest, document))


def _attached(job: Job, target: Target, manifest: Manifest, report: ImageReport, kind: Stage, what: str,
              put: Callable[[], object]) -> bool:
    """put() attaches an artifact to the pushed manifest before any tag moves; a registry error fails the image at
    stage kind, saying that a rerun attaches it."""
    try:
        put()
    except RegistryError as exc:
        where = f"{target.api.address}/{target.repository(job.repository)}@{manifest.digest}"
        report.digest = manifest.digest
        report.fail(kind, f"{kind}: cannot attach {what} to {where} (pushed under {report.immutable_tag}; no "
                          f"tag moved; a rerun attaches it): {exc}")
        return False
    return True


def repair_sbom(client: docker.DockerClient, job: Job, target: Target, published: Manifest,
                stage: Callable[[str], None], report: ImageReport) -> bool:
    """A published image without an SBOM (a run whose attach failed): attach one before its tags move, made from
    the local image when it is exactly the published one (same manifest digest). False: the image failed."""
    if target.has_sbom(report, published):
        return True
    try:
        local = client.images.get(content_ref(job)).id
    except (ImageNotFound, DockerException):
        return True  # nothing here to make it from: the record says so (no sbom_artifact)
    if local != published.digest:
        return True
    report.image_id = local
    document = make_sbom(client, job, stage, report)
    return document is not None and attach(job, target, published, document, stage, report)


def attach_lock(job: Job, target: Target, manifest: Manifest, stage: Callable[[str], None],
                report: ImageReport) -> bool:
    """A locked image's lock files, attached to its manifest before its tags move (builder reproduce rebuilds from
    them); nothing for an unlocked image. False: the image failed."""
    if job.rendered is None or not job.rendered.lock_files:
        return True
    stage("attach lock")
    recorded = lockrecord.Recorded(dict(job.rendered.lock_files))
    return _attached(job, target, manifest, report, "push", "the lock record",
                     lambda: target.attach_lock(report, manifest, recorded))


def repair_lock(job: Job, target: Target, published: Manifest, stage: Callable[[str], None],
                report: ImageReport) -> bool:
    """A published locked image without its lock record (a run whose attach failed, or one before records): the
    same content hash means the same locked inputs, so this render's lock files are the ones it was built from."""
    if job.rendered is None or not job.rendered.lock_files \
            or target.has_referrer(report, published, lockrecord.MEDIA_TYPE):
        return True
    return attach_lock(job, target, published, stage, report)


def _packages(client: docker.DockerClient, image_id: str) -> list[str]:
    """What is in the image's environment, for the record and the catalog (empty when pip cannot say)."""
    try:
        pip = [f"{tags.VENV_DIR}/bin/python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"]
        code, out, _ = run_captured(client, image_id, pip, timeout=120, entrypoint=[])
    except (TimeoutError, DockerException):
        return []
    return sorted(line for line in out.splitlines() if "==" in line) if code == 0 else []


def _size(client: docker.DockerClient, image_id: str | None) -> int | None:
    """Installed (unpacked) bytes: the compressed size is the registry's, read from the manifest on push."""
    return installed_bytes(client, image_id) if image_id else None
