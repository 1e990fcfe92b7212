"""The one image lifecycle: render -> bake -> validate -> push (immutable tag) -> move tags.

`builder build`, `builder push` and `builder publish` all run every image through `run_image`; they differ
only in their Options (publish adds the skip-by-content-hash decision); their Jobs come from `jobs`. The
build stage bakes every image that needs building (shared stages are built once); then each image
goes through validation and push on its own. A failure in one image is recorded in its ImageReport and
the next image goes on; an image is pushed only after its own validation passed, and its moving tags move
only after its immutable tag holds exactly that image.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

from builder.build.bake import BuildResult, Cache, Export, bake, require_buildx, waves
from builder.build.engine import run_captured
from builder.core import tags
from builder.core.scratch import scratch_dir
from builder.publish import record
from builder.publish.jobs import Job
from builder.publish.promote import Target
from builder.publish.record import ImageReport, Stage
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError
from builder.render import tree as imagetree
from builder.render.dockerfile import render_images
from builder.render.wheels import WheelSource
from builder.validate import sbom
from builder.validate.runner import validate_image

__all__ = ["Cache", "Events", "Options", "Prepared", "rebuild", "run", "run_and_record", "run_image"]


@dataclass(frozen=True)
class Options:
    source: WheelSource = field(default_factory=WheelSource)
    validate: bool = True
    gpu: bool = False
    target: Target | None = None  # where validated images are pushed; None: nowhere
    skip_published: bool = False  # publish: content already under its immutable tag is not built again
    plan: bool = False  # publish --plan: look up what would be built, skipped and re-tagged; build nothing
    no_push: bool = False  # publish --no-push: build and validate what changed; push and re-tag nothing
    sbom: bool = True  # with a target: an SBOM from each validated image, attached to it before its tags move
    compression: str = "gzip"  # the layers' compression (gzip: every client pulls it; zstd: Docker 23+)
    cache: Cache | None = None  # BuildKit's cache, imported from and exported to a registry (cold runners)

    @property
    def rehearsal(self) -> bool:
        """Nothing may be written to the registry: --plan or --no-push."""
        return self.plan or self.no_push


@dataclass(frozen=True)
class Events:
    """What the run tells its display: stage changes and build log lines, per image tag."""

    stage: Callable[[str, str], None] = lambda tag, stage: None
    line: Callable[[str, str], None] = lambda tag, line: None


@dataclass
class Prepared:
    """What the run learnt before the images' own lifecycles: which were published, which were baked."""

    published: dict[str, Manifest | None] = field(default_factory=dict)  # tag -> its immutable manifest
    built: dict[str, BuildResult] = field(default_factory=dict)  # tag -> the bake's result
    errors: dict[str, RegistryError] = field(default_factory=dict)  # tag -> why it could not be looked up


def run(client: docker.DockerClient, jobs: list[Job], options: Options, events: Events = Events(),
        reports: list[ImageReport] | None = None) -> list[ImageReport]:
    """Every job in turn; reports (when given) is filled as the run goes, so an interrupted run can be recorded."""
    done = reports if reports is not None else []
    if options.target is not None and jobs and not options.plan:
        options.target.preflight(jobs[0].repository, write=not options.no_push)
    prepared = prepare(client, jobs, options, events)
    for job in jobs:
        done.append(job.report())
        done[-1] = run_image(client, job, options, prepared, events, done[-1])
    return done


def prepare(client: docker.DockerClient, jobs: list[Job], options: Options, events: Events = Events()) -> Prepared:
    """The build stage for all jobs at once: look up what is published, then one bake of what is left."""
    prepared = Prepared()
    wanted = []
    for job in jobs:
        if options.target is not None and options.skip_published:
            try:
                found = prepared.published[job.tag] = options.target.published(job.report())
            except RegistryError as exc:  # the image's own failure, reported by its lifecycle
                prepared.errors[job.tag] = exc
                continue
            if found is not None or options.plan:
                continue
        if job.rendered is None or (options.skip_published and _has_image(client, _content_ref(job), job.content_hash)):
            continue  # nothing to build, or a rerun after a failed push finds its own build
        wanted.append(job)
    if wanted:
        prepared.built = _bake(wanted, options.source, events, options)
    return prepared


def _bake(jobs: list[Job], source: WheelSource, events: Events, options: Options) -> dict[str, BuildResult]:
    """The jobs' images from a fresh build tree (rendered together: one Dockerfile per combination), in bake waves,
    through an OCI layout into the engine."""
    cache = options.cache and replace(options.cache, write=options.cache.write and not options.rehearsal)
    with scratch_dir("rif-layout-") as layout:
        return _bake_into(jobs, source, events, Export(layout, options.compression, cache=cache))


def _bake_into(jobs: list[Job], source: WheelSource, events: Events, export: Export,
               no_cache: bool = False) -> dict[str, BuildResult]:
    require_buildx()
    rendered = render_images([j.rendered.cell for j in jobs if j.rendered is not None], source)
    by_target = {r.target: job for r, job in zip(rendered, jobs, strict=True)}
    for r, job in zip(rendered, jobs, strict=True):
        assert r.content_hash == job.content_hash, f"{job.tag}: rendered alone and together, hashes differ"
        events.stage(job.tag, "build")

    def line(target: str | None, text: str) -> None:
        for job in [by_target[target]] if target in by_target else jobs:
            events.line(job.tag, text)

    with imagetree.run_tree(source) as tree:
        imagetree.write(tree, rendered, prune=True, source=source)
        results: dict[str, BuildResult] = {}
        for wave in waves({r.target: r.chain for r in rendered}):
            results.update(bake(tree / imagetree.BAKE_FILE, wave, line, cwd=tree.parent, export=export,
                                no_cache=no_cache))
    return {by_target[t].tag: result for t, result in results.items()}


def rebuild(job: Job, source: WheelSource, layout: Path, compression: str, events: Events = Events()) -> BuildResult:
    """`builder reproduce`: the job's image baked again without BuildKit's cache, left in layout (not loaded)."""
    built = _bake_into([job], source, events, Export(layout, compression, load=False), no_cache=True)
    return built[job.tag]


def run_and_record(client: docker.DockerClient, jobs: list[Job], options: Options, events: Events,
                   record_path: Path | None, registry: str | None) -> list[ImageReport]:
    """run(), and the run record written whatever happens: images never reached are `not-attempted`."""
    reports: list[ImageReport] = []
    finished = False
    try:
        run(client, jobs, options, events, reports)
        finished = True
    finally:
        done = {r.tag for r in reports}
        for job in jobs:
            if job.tag not in done:
                reports.append(job.report())
                reports[-1].state = "not-attempted"
        if record_path is not None:
            record.write(record_path, reports, registry, finished)
    return reports


def run_image(client: docker.DockerClient, job: Job, options: Options, prepared: Prepared | None = None,
              events: Events = Events(), report: ImageReport | None = None) -> ImageReport:
    report = report or job.report()
    start = time.monotonic()
    try:
        _lifecycle(client, job, options, prepared or prepare(client, [job], options, events), events, report)
    except RegistryError as exc:  # AuthError included: the message names registry and user, never the secret
        stage: Stage = "push" if report.image_id else "registry"
        report.fail(stage, f"{stage}: {exc}")
    report.seconds = round(time.monotonic() - start, 3)
    return report


def _lifecycle(client: docker.DockerClient, job: Job, options: Options, prepared: Prepared, events: Events,
               report: ImageReport) -> None:
    target = options.target
    if job.tag in prepared.errors:
        raise prepared.errors[job.tag]
    if target is not None and options.skip_published:
        published = prepared.published.get(job.tag)
        if published is not None or options.plan:
            report.state = ("would-skip" if options.rehearsal else "skipped") if published else "would-build"
            if published is not None and not options.rehearsal and options.sbom \
                    and not _repair_sbom(client, job, target, published, events, report):
                return
            if published is not None:
                target.promote(report, published, options.rehearsal, lambda stage: events.stage(job.tag, stage))
            else:
                report.moved = list(report.tags)
            return
    if not _build(client, job, prepared.built.get(job.tag), report):
        return
    if options.validate and not _validate(client, job, options, events, report):
        return
    if target is None:
        return
    document = _sbom(client, job, events, report) if options.sbom else None
    if options.sbom and document is None:
        return
    if options.no_push:
        return  # --no-push: built, validated and inventoried; the registry is never written to
    events.stage(job.tag, "push")
    manifest = target.push(client, report)
    # Before any tag moves: a moving tag always names an image whose SBOM is attached.
    if document is not None and not _attach(job, target, manifest, document, events, report):
        return
    report.state = "published"
    target.promote(report, manifest, on_stage=lambda stage: events.stage(job.tag, stage))


def _build(client: docker.DockerClient, job: Job, built: BuildResult | None, report: ImageReport) -> bool:
    """Take the bake's image for the job, or find the one it names; False when there is none to go on with."""
    if built is None:  # not baked: an image already in the engine (builder push/test, or a rerun's own build)
        return _existing(client, job.local_image if job.rendered is None else _content_ref(job), report)
    report.build_seconds, report.log_tail = built.seconds, built.log_tail
    if not built.ok:
        hash_mismatch = any(HASH_MISMATCH in line for line in built.log_tail)
        report.fail("build", f"build: {LOCK_BROKEN if hash_mismatch else built.error}")
        return False
    report.image_id, report.state = built.image_id, "built"
    report.image_bytes = _size(client, built.image_id)
    return True


HASH_MISMATCH = "DO NOT MATCH THE HASHES"  # pip's words when --require-hashes refuses a wheel
LOCK_BROKEN = ("a wheel does not match the hashes in the lock (pip --require-hashes): the wheelhouse or index now "
               "serves other bytes under a locked name and version; nothing was pushed. If the new wheel is wanted, "
               "`builder lock --update` pins it")


def _content_ref(job: Job) -> str:
    """The local name that holds one content (bake tags it): no other run moves it elsewhere."""
    return tags.local_ref(job.repository, tags.immutable_tag(job.tag, job.content_hash))


def _existing(client: docker.DockerClient, ref: str | None, report: ImageReport) -> bool:
    try:
        image = client.images.get(ref or "")
    except (ImageNotFound, DockerException) as exc:
        report.fail("build", f"build: no local image {ref}: {exc}")
        return False
    report.image_id, report.state = image.id, "built"
    report.image_bytes = int(image.attrs.get("Size") or 0)
    return True


def _validate(client: docker.DockerClient, job: Job, options: Options, events: Events, report: ImageReport) -> bool:
    events.stage(job.tag, "validate")
    assert report.image_id is not None
    result = validate_image(client, report.image_id, job.expect, job.labels, gpu=options.gpu)
    report.validation, report.validate_seconds = result.checks, round(result.seconds, 3)
    if not result.ok:
        report.fail("validate", "validation")
        return False
    report.state = "validated"
    report.packages = _packages(client, report.image_id)
    return True


def _sbom(client: docker.DockerClient, job: Job, events: Events, report: ImageReport) -> sbom.Sbom | None:
    """The SBOM of the validated image, from a container of it; None (the image failed) when it cannot say."""
    events.stage(job.tag, "sbom")
    assert report.image_id is not None
    try:
        document = sbom.generate(client, report.image_id, f"{job.repository}:{report.immutable_tag}")
    except sbom.SbomError as exc:
        report.fail("sbom", f"sbom: {exc}")
        return None
    report.sbom_digest, report.sbom_packages = document.digest, len(document.packages)
    return document


def _attach(job: Job, target: Target, manifest: Manifest, document: sbom.Sbom, events: Events,
            report: ImageReport) -> bool:
    events.stage(job.tag, "attach sbom")
    try:
        target.attach_sbom(report, manifest, document)
    except RegistryError as exc:
        where = f"{target.api.address}/{target.repository(job.repository)}@{manifest.digest}"
        report.digest = manifest.digest
        report.fail("sbom", f"sbom: cannot attach the SBOM to {where} (pushed under {report.immutable_tag}; no "
                            f"tag moved; a rerun attaches it): {exc}")
        return False
    return True


def _repair_sbom(client: docker.DockerClient, job: Job, target: Target, published: Manifest, events: Events,
                 report: ImageReport) -> bool:
    """A published image without an SBOM (a run whose attach failed): attach one before its tags move, made from
    the local image when it is exactly the published one (same manifest digest). False: the image failed."""
    if target.has_sbom(report, published):
        return True
    try:
        local = client.images.get(_content_ref(job)).id
    except (ImageNotFound, DockerException):
        return True  # nothing here to make it from: the record says so (no sbom_artifact)
    if local != published.digest:
        return True
    report.image_id = local
    document = _sbom(client, job, events, report)
    return document is not None and _attach(job, target, published, document, events, report)


def _packages(client: docker.DockerClient, image_id: str) -> list[str]:
    """What is in the image's environment, for the record and the catalog (empty when pip cannot say)."""
    try:
        pip = [f"{tags.VENV_DIR}/bin/python", "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"]
        code, out, _ = run_captured(client, image_id, pip, timeout=120, entrypoint=[])
    except (TimeoutError, DockerException):
        return []
    return sorted(line for line in out.splitlines() if "==" in line) if code == 0 else []


def _has_image(client: docker.DockerClient, ref: str, content_hash: str) -> bool:
    try:
        labels = client.images.get(ref).labels or {}
    except (ImageNotFound, DockerException):
        return False
    return labels.get(tags.HASH_LABEL) == content_hash


def _size(client: docker.DockerClient, image_id: str | None) -> int | None:
    try:
        return int(client.images.get(image_id or "").attrs.get("Size") or 0)
    except DockerException:
        return None
