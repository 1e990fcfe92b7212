"""The build stage's bake: the jobs' images from one fresh build tree (rendered together: one Dockerfile per
combination), in bake waves, through an OCI layout (or straight) into the engine. It gets only BakeOptions: the
registry it publishes to is none of its business (BuildKit's registry cache aside).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from builder.buildkit.bake import BuildResult, OnLine, bake, require_buildx, waves
from builder.buildkit.builders import CURRENT, BuilderUnusable, BuildKit, require_builder
from builder.buildkit.engine import EngineUnavailable, connect
from builder.buildkit.export import Export, store_direct
from builder.core.scratch import scratch_dir
from builder.pipeline import stagewave
from builder.pipeline.jobs import Job, require_inputs
from builder.pipeline.options import BakeOptions
from builder.render import imagetree
from builder.render.dockerfile import RenderedCell, render_images
from builder.render.sources import WheelSource


@dataclass(frozen=True)
class Events:
    """What the run tells its display: stage changes and build log lines, per image tag."""

    stage: Callable[[str, str], None] = lambda tag, stage: None
    line: Callable[[str, str], None] = lambda tag, line: None


QUIET = Events()  # a run nobody watches


def bake_jobs(jobs: list[Job], options: BakeOptions, events: Events) -> dict[str, BuildResult]:
    """The jobs' images (tag -> the bake's result), through a scratch OCI layout into the engine."""
    with scratch_dir("rif-layout-") as layout:
        return bake_into(jobs, options.source, events, Export(layout, options.compression, cache=options.cache),
                         options.buildkit)


def builder(kit: BuildKit) -> BuildKit:
    """kit's builder there and able, or one line naming what it lacks (builder.buildkit.builders)."""
    try:
        return require_builder(kit)
    except BuilderUnusable:
        require_buildx()  # no buildx at all: say how to get it (asked only then: 0.2 s a run)
        raise


def bake_into(jobs: list[Job], source: WheelSource, events: Events, export: Export, kit: BuildKit,
              no_cache: bool = False) -> dict[str, BuildResult]:
    kit = builder(kit)
    require_inputs(jobs, source, kit)  # seconds, before any bake: bases and wheels there, or what makes them
    export = straight(export, kit)
    rendered = together(jobs, source)
    if export.cache is not None:  # the shared stages a first wave (builder stages) left in the registry
        export = replace(export, cache=stagewave.with_stages(export.cache, rendered))
    by_target = {r.target: job for r, job in zip(rendered, jobs, strict=True)}
    for r, job in zip(rendered, jobs, strict=True):
        assert r.content_hash == job.content_hash, f"{job.tag}: rendered alone and together, hashes differ"
        events.stage(job.tag, "build")

    def line(target: str | None, text: str) -> None:
        for job in [by_target[target]] if target in by_target else jobs:
            events.line(job.tag, text)

    with imagetree.run_tree(source, kit.identity()) as tree:
        imagetree.write(tree, rendered, prune=True, source=source)
        results: dict[str, BuildResult] = {}
        exported = export.cache is not None and export.cache.write
        for wave in waves({r.target: r.chain for r in rendered}, exported):
            results.update(bake(tree / imagetree.BAKE_FILE, wave, line, cwd=tree.parent, export=export,
                                no_cache=no_cache, kit=kit))
    return {by_target[t].tag: result for t, result in results.items()}


def straight(export: Export, kit: BuildKit) -> Export:
    """Straight into the engine when the builder is its own BuildKit on its containerd store (export.py): the
    layout and the load would only copy each layer once more on the runner's disk."""
    if not export.load or kit.driver != "docker" or kit.name is not None or kit.context is not None:
        return export
    try:
        return replace(export, direct=store_direct(connect()))
    except EngineUnavailable:
        return export  # the load says what is wrong with the engine


def together(jobs: list[Job], source: WheelSource) -> list[RenderedCell]:
    """The jobs' images as one render (one Dockerfile per combination): as the caller rendered them when it rendered
    them in one go from source (matrix_jobs), else rendered again together."""
    given = [j.rendered for j in jobs if j.rendered is not None]
    dockerfiles: dict[str, str] = {}
    if len(given) == len(jobs) and all(r.source == source and dockerfiles.setdefault(r.group, r.dockerfile) ==
                                       r.dockerfile for r in given):
        return given
    return render_images([r.cell for r in given], source)


def shared_stages(jobs: list[Job], options: BakeOptions, on_line: OnLine) -> list[stagewave.StageOutcome]:
    """`builder stages`: the stages the jobs' combinations share, built once into options.cache
    (exported only when it may be written), for the per-combination jobs that follow to import."""
    cache = options.cache
    assert cache is not None, "the shared stages go to the registry cache"
    kit = builder(options.buildkit)
    require_inputs(jobs, options.source, kit)
    return stagewave.build(together(jobs, options.source), options.source, cache, options.compression, on_line, kit,
                           options.row_of)


def rebuild(job: Job, source: WheelSource, layout: Path, compression: str, events: Events = Events(),
            kit: BuildKit = CURRENT) -> BuildResult:
    """`builder reproduce`: the job's image baked again on kit without BuildKit's cache, left in layout (not
    loaded)."""
    built = bake_into([job], source, events, Export(layout, compression, load=False), kit, no_cache=True)
    return built[job.tag]
