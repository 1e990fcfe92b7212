"""The one image lifecycle: render -> bake -> validate -> push (immutable tag) -> move tags.

`builder build`, `builder push` and `builder publish` all run every image through `run_image`; they differ
only in their Options (publish adds the skip-by-content-hash decision); their Jobs come from `jobs`. The
build stage bakes every image that needs building (shared stages are built once), from the render the jobs
came with; then each image goes through its own steps (builder.pipeline.steps: validation, SBOM) and push. A
failure in one image is recorded in its ImageReport and the next image goes on; an image is pushed only after
its own validation passed, and its moving tags move only after its immutable tag holds exactly that image.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import docker
from docker.errors import DockerException, ImageNotFound

from builder.buildkit.bake import BuildResult, OnLine, bake, require_buildx, waves
from builder.buildkit.builders import CURRENT, BuilderUnusable, BuildKit, require_builder
from builder.buildkit.engine import EngineUnavailable, connect
from builder.buildkit.export import Cache, Export, store_direct
from builder.core import tags
from builder.core.safefs import OutputError
from builder.core.scratch import scratch_dir
from builder.pipeline import release, stagewave, steps
from builder.pipeline.jobs import Job, require_inputs
from builder.pipeline.steps import content_ref
from builder.publish import record
from builder.publish.promote import Target
from builder.publish.record import ImageReport, Stage
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError
from builder.render import imagetree
from builder.render.dockerfile import RenderedCell, render_images
from builder.render.sources import WheelSource

__all__ = ["Cache", "Events", "Options", "Prepared", "rebuild", "run", "run_and_record", "run_image"]


@dataclass(frozen=True, kw_only=True)
class Options:
    source: WheelSource = field(default_factory=WheelSource)
    validate: bool = True
    gpu: bool = False
    apptainer: bool = False  # also under Apptainer (builder.validate.apptainer): off, a second conversion costs time
    target: Target | None = None  # where validated images are pushed; None: nowhere
    skip_published: bool = False  # publish: content already under its immutable tag is not built again
    no_push: bool = False  # publish --no-push: build and validate what changed; push and re-tag nothing
    sbom: bool = True  # with a target: an SBOM from each validated image, attached to it before its tags move
    compression: str = "gzip"  # the layers' compression (gzip: every client pulls it; zstd: Docker 23+)
    cache: Cache | None = None  # BuildKit's cache, imported from and exported to a registry (cold runners)
    buildkit: BuildKit = CURRENT  # the builder that bakes (--builder) and its RUN steps' network
    row_of: dict[str, str] = field(default_factory=dict)  # --shared-stages: image tag -> its workflow row
    release: bool = False  # publish --release: one GPU family at a time, each leaving the engine after the next

    @property
    def rehearsal(self) -> bool:
        """Nothing may be written to the registry (--no-push; --plan never gets here: builder.publish.planner)."""
        return self.no_push

    @property
    def run_cache(self) -> Cache | None:
        """The registry cache as this run may use it: imported always, exported only when it may write."""
        return self.cache and replace(self.cache, write=self.cache.write and not self.rehearsal)


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
    if options.target is not None and jobs:
        options.target.preflight(jobs[0].repository, write=not options.no_push)
    between = release.Waves(client, options.buildkit, options.run_cache)
    for wave in release.waves(jobs) if options.release else [jobs]:
        prepared = prepare(client, wave, replace(options, cache=between.before(done)), events)
        between.after(wave, {tag for tag, result in prepared.built.items() if result.ok}, done)
        for job in wave:
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
            if found is not None:
                continue
        if job.rendered is None or (options.skip_published and _has_image(client, content_ref(job), job.content_hash)):
            continue  # nothing to build, or a rerun after a failed push finds its own build
        wanted.append(job)
    if wanted:
        prepared.built = _bake(wanted, options.source, events, options)
    return prepared


def _bake(jobs: list[Job], source: WheelSource, events: Events, options: Options) -> dict[str, BuildResult]:
    """The jobs' images from a fresh build tree (rendered together: one Dockerfile per combination), in bake waves,
    through an OCI layout into the engine."""
    with scratch_dir("rif-layout-") as layout:
        return _bake_into(jobs, source, events, Export(layout, options.compression, cache=options.run_cache),
                          options.buildkit)


def _builder(kit: BuildKit) -> BuildKit:
    """kit's builder there and able, or one line naming what it lacks (builder.buildkit.builders)."""
    try:
        return require_builder(kit)
    except BuilderUnusable:
        require_buildx()  # no buildx at all: say how to get it (asked only then: 0.2 s a run)
        raise


def _bake_into(jobs: list[Job], source: WheelSource, events: Events, export: Export, kit: BuildKit,
               no_cache: bool = False) -> dict[str, BuildResult]:
    kit = _builder(kit)
    require_inputs(jobs, source, kit)  # seconds, before any bake: bases and wheels there, or what makes them
    export = _straight(export, kit)
    rendered = _together(jobs, source)
    if export.cache is not None:  # the shared stages a first wave (publish --shared-stages) left in the registry
        export = replace(export, cache=stagewave.with_stages(export.cache, rendered))
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
        exported = export.cache is not None and export.cache.write
        for wave in waves({r.target: r.chain for r in rendered}, exported):
            results.update(bake(tree / imagetree.BAKE_FILE, wave, line, cwd=tree.parent, export=export,
                                no_cache=no_cache, kit=kit))
    return {by_target[t].tag: result for t, result in results.items()}


def _straight(export: Export, kit: BuildKit) -> Export:
    """Straight into the engine when the builder is its own BuildKit on its containerd store (export.py): the
    layout and the load would only copy each layer once more on the runner's disk."""
    if not export.load or kit.driver != "docker" or kit.name is not None or kit.context is not None:
        return export
    try:
        return replace(export, direct=store_direct(connect()))
    except EngineUnavailable:
        return export  # the load says what is wrong with the engine


def _together(jobs: list[Job], source: WheelSource) -> list[RenderedCell]:
    """The jobs' images as one render (one Dockerfile per combination): as the caller rendered them when it rendered
    them in one go from source (matrix_jobs), else rendered again together."""
    given = [j.rendered for j in jobs if j.rendered is not None]
    dockerfiles: dict[str, str] = {}
    if len(given) == len(jobs) and all(r.source == source and dockerfiles.setdefault(r.group, r.dockerfile) ==
                                       r.dockerfile for r in given):
        return given
    return render_images([r.cell for r in given], source)


def shared_stages(jobs: list[Job], options: Options, on_line: OnLine) -> list[stagewave.StageOutcome]:
    """`builder publish --shared-stages`: the stages the jobs' combinations share, built once into options.cache
    (exported only when it may be written), for the per-combination jobs that follow to import."""
    cache = options.run_cache
    assert cache is not None, "the shared stages go to the registry cache"
    kit = _builder(options.buildkit)
    require_inputs(jobs, options.source, kit)
    return stagewave.build(_together(jobs, options.source), options.source, cache, options.compression, on_line, kit,
                           options.row_of)


def rebuild(job: Job, source: WheelSource, layout: Path, compression: str, events: Events = Events(),
            kit: BuildKit = CURRENT) -> BuildResult:
    """`builder reproduce`: the job's image baked again on kit without BuildKit's cache, left in layout (not
    loaded)."""
    built = _bake_into([job], source, events, Export(layout, compression, load=False), kit, no_cache=True)
    return built[job.tag]


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
        for job in jobs:
            if job.tag not in done:
                reports.append(job.report())
                reports[-1].state = "not-attempted"
        if record_path is not None:
            try:
                record.write(record_path, reports, registry, finished)
            except OutputError as exc:
                unwritten = exc
    return reports, unwritten


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

    def stage(name: str) -> None:
        events.stage(job.tag, name)

    if job.tag in prepared.errors:
        raise prepared.errors[job.tag]
    if target is not None and options.skip_published:
        published = prepared.published.get(job.tag)
        if published is not None:
            report.state = "would-skip" if options.rehearsal else "skipped"
            if not options.rehearsal and options.sbom \
                    and not steps.repair_sbom(client, job, target, published, stage, report):
                return
            if not options.rehearsal and not steps.repair_lock(job, target, published, stage, report):
                return
            report.pushed_bytes = None if options.rehearsal else 0  # unchanged: no layer goes up again
            target.promote(report, published, options.rehearsal, stage)
            return
    if not steps.take_build(client, job, prepared.built.get(job.tag), report):
        return
    if options.validate and not steps.validate(client, job, options.gpu, stage, report, options.apptainer):
        return
    if target is None:
        return
    document = steps.make_sbom(client, job, stage, report) if options.sbom else None
    if options.sbom and document is None:
        return
    if options.no_push:
        return  # --no-push: built, validated and inventoried; the registry is never written to
    stage("push")
    built = prepared.built.get(job.tag)
    manifest = target.push(client, report, options.cache.ref if options.cache else None, built.blobs if built else (),
                           built.target if built else None)
    # Before any tag moves: a moving tag always names an image whose SBOM is attached.
    if document is not None and not steps.attach(job, target, manifest, document, stage, report):
        return
    if not steps.attach_lock(job, target, manifest, stage, report):
        return
    report.state = "published"
    target.promote(report, manifest, on_stage=stage)


def _has_image(client: docker.DockerClient, ref: str, content_hash: str) -> bool:
    try:
        labels = client.images.get(ref).labels or {}
    except (ImageNotFound, DockerException):
        return False
    return labels.get(tags.HASH_LABEL) == content_hash
