"""The whole run: plan images -> render -> context -> build -> validate -> push, one image at a time.

A failure in one image is recorded and the next goes on; an image is pushed, under the tag of every
cell it serves, only after its own validation passed.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker

from builder.build import BuildResult, build_image
from builder.context import write_context
from builder.plan import ImagePlan, plan_images
from builder.push import PushResult, push_image
from builder.render import RenderedCell, WheelSource, render_cell
from builder.spec import CellSpec
from builder.validate import ValidationResult, validate_image

LOCAL_NAMESPACE = "rocm-image-factory"


@dataclass(frozen=True)
class Options:
    source: WheelSource = field(default_factory=WheelSource)
    validate: bool = True
    registry: str | None = None  # push target namespace, e.g. 127.0.0.1:5000/rocm; None: do not push
    gpu: bool = False


@dataclass
class ImageReport:
    plan: ImagePlan
    rendered: RenderedCell
    build: BuildResult | None = None
    validation: ValidationResult | None = None
    pushes: list[PushResult] = field(default_factory=list)

    @property
    def cell(self) -> CellSpec:
        return self.plan.content

    @property
    def failed(self) -> bool:
        return bool((self.build and not self.build.ok) or (self.validation and not self.validation.ok)
                    or any(not p.ok for p in self.pushes))

    @property
    def status(self) -> str:
        if self.build is None or not self.build.ok:
            return "failed: build"
        if self.validation is not None and not self.validation.ok:
            return "failed: validation"
        if self.pushes:
            return "pushed" if all(p.ok for p in self.pushes) else "failed: push"
        return "validated" if self.validation is not None else "built (not validated)"


def local_ref(cell: CellSpec) -> str:
    return f"{LOCAL_NAMESPACE}/{cell.image}:{cell.tag}"


def run(client: docker.DockerClient, cells: list[CellSpec], options: Options,
        on_line: Callable[[CellSpec, str], None] = lambda cell, line: None,
        on_stage: Callable[[CellSpec, str], None] = lambda cell, stage: None) -> list[ImageReport]:
    reports = []
    with tempfile.TemporaryDirectory(prefix="rif-context-") as tmp:
        for plan in plan_images(cells):
            reports.append(run_image(client, plan, options, Path(tmp) / plan.content.tag, on_line, on_stage))
    return reports


def run_image(client: docker.DockerClient, plan: ImagePlan, options: Options, context_dir: Path,
              on_line: Callable[[CellSpec, str], None],
              on_stage: Callable[[CellSpec, str], None]) -> ImageReport:
    cell = plan.content
    report = ImageReport(plan, render_cell(cell, options.source))
    on_stage(cell, "build")
    context = write_context(report.rendered, context_dir)
    report.build = build_image(client, report.rendered, context, local_ref(cell), lambda line: on_line(cell, line))
    if not report.build.ok or not options.validate:
        return report
    on_stage(cell, "validate")
    report.validation = validate_image(client, report.build.ref, cell.expectations(), report.rendered.labels,
                                       gpu=options.gpu)
    if report.validation.ok and options.registry:
        on_stage(cell, "push")
        repository = f"{options.registry}/{cell.image}"
        report.pushes = [push_image(client, report.build.ref, repository, tag) for tag in plan.tags]
    return report
