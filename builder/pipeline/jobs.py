"""What the lifecycle runs: one Job per image, from the matrix (rendered, to build) or from an image already in
the engine (`builder push`, `builder test`), held to its matrix cell or to what is baked into it."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import docker
from docker.errors import APIError, ImageNotFound

from builder.buildkit import builders, preflight
from builder.buildkit.builders import CURRENT, BuildKit
from builder.buildkit.engine import connect, run_captured
from builder.core import tags
from builder.core.errors import usage_error
from builder.matrix.expand import expand_matrix
from builder.matrix.selection import ImagePlan, latest_cell, plan_images, select, shard
from builder.registry import images, reference
from builder.registry.errors import RegistryError
from builder.render.bakefile import group_of
from builder.render.dockerfile import RenderedCell, render_cell, render_images
from builder.render.installs import requirements
from builder.render.sources import WheelSource


@dataclass(frozen=True, kw_only=True)
class Job:
    """One image to take through the lifecycle: from a rendered cell, or an image already in the engine."""

    tag: str
    repository: str
    tags: list[str]
    content_hash: str
    expect: dict[str, Any]
    labels: dict[str, str] | None  # None: hold the image to the labels baked into it
    rendered: RenderedCell | None = None  # None: nothing to build (builder push, builder test)
    local_image: str | None = None
    matrix: Path | None = None  # the matrix file it came from: what a fix (`builder wheelhouse`) names

    @classmethod
    def of(cls, plan: ImagePlan, source: WheelSource, rendered: RenderedCell | None = None) -> Job:
        rendered = rendered or render_cell(plan.content, source)
        cell = rendered.cell
        return cls(tag=cell.tag, repository=cell.image, tags=plan.tags, content_hash=rendered.content_hash,
                   expect=cell.expectations(), labels=rendered.labels, rendered=rendered,
                   local_image=tags.local_ref(cell.image, cell.tag))

    def need(self) -> preflight.Need | None:
        """What its bake takes from outside (base image, wheels); None when there is nothing to build."""
        if self.rendered is None:
            return None
        cell = self.rendered.cell
        name = next((t for t in self.tags if t != tags.LATEST), self.tag)
        base_tool = cell.os_family.BASE_TOOL
        return preflight.Need(tag=name, os=cell.os, base_tool=base_tool, dockerfile=self.rendered.dockerfile,
                              python=cell.python, requirements=tuple(requirements(cell)))

    @property
    def combination(self) -> str:
        """The job's bake group (its combination): the unit that shards and workflow rows keep together."""
        return group_of(self.rendered) if self.rendered is not None else self.tag

    @property
    def immutable_tag(self) -> str:
        """The tag this content is pushed under, never moved: `<tag>-<hash12>`."""
        return tags.immutable_tag(self.tag, self.content_hash)


def job_for_image(client: docker.DockerClient, ref: str, plans: list[ImagePlan] | None = None,
                  source: WheelSource | None = None, pull: bool = False) -> Job:
    """A Job for an image already in the engine (with pull, pulled first when it is not, as `docker run` does),
    held to its matrix cell (plans) or to what is baked into it.

    ref is parsed as a Docker reference before any engine call. Only images this factory built qualify (they
    carry its labels); the job names the image by ID, so a tag moved by someone else meanwhile cannot change what
    is validated and pushed.
    """
    parsed = reference.parse(ref)
    try:
        image = client.images.get(str(parsed))
    except ImageNotFound:
        if not pull or not parsed.pullable:
            raise usage_error("IMAGE", f"no local image {str(parsed)!r}") from None
        image = pulled(client, parsed)
    labels = image.labels or {}
    tag, content_hash = labels.get(tags.TAG_LABEL), labels.get(tags.HASH_LABEL)
    if not tag or not content_hash:
        raise usage_error("IMAGE", f"{ref} was not built by rocm-image-factory (it has no {tags.TAG_LABEL} label)")
    if plans is not None:
        found = {p.content.tag: p for p in plans}.get(tag)
        if found is None:
            raise usage_error("IMAGE", f"{ref} (tag {tag!r}) is no image of this matrix")
        return replace(Job.of(found, source or WheelSource()), rendered=None, local_image=image.id)
    code, raw, stderr = run_captured(client, str(image.id), ["cat", f"{tags.RIF_DIR}/{tags.CELL_FILE}"], entrypoint=[])
    try:
        expect = json.loads(raw) if code == 0 else None
    except ValueError:
        expect = None
    if not isinstance(expect, dict):
        raise usage_error("IMAGE", f"{ref} has no readable {tags.RIF_DIR}/{tags.CELL_FILE}: {stderr.strip()[:200]}")
    repository = labels.get(tags.IMAGE_LABEL) or "pytorch"
    return Job(tag=tag, repository=repository, tags=[tag], content_hash=content_hash, expect=expect, labels=None,
               local_image=image.id)


def pulled(client: docker.DockerClient, ref: reference.Reference) -> Any:
    """The image ref names, pulled from its registry (by digest when it names one); a RegistryError (exit 1) with
    the registry's own words when it cannot be."""
    repository, tag = ref.pull_args()
    try:
        return client.images.pull(repository, tag=tag)
    except APIError as exc:
        why = reference.shown(str(exc.explanation or exc))
        raise RegistryError(f"{ref.registry}: cannot pull {ref}: {why}", status=exc.status_code) from None


def matrix_jobs(matrix: Path, names: list[str] | None, match: str | None, source: WheelSource) -> list[Job]:
    """The selected cells of a matrix file as jobs, one per image, `latest` on the image that earns it."""
    expansion = expand_matrix(matrix)
    cells = select(expansion.cells, names, matrix, match)
    plans = plan_images(cells, latest_cell(expansion.cells, expansion.default_os))
    rendered = render_images([p.content for p in plans], source)
    return [replace(Job.of(p, source, r), matrix=matrix) for p, r in zip(plans, rendered, strict=True)]


def require_inputs(jobs: list[Job], source: WheelSource, kit: BuildKit = CURRENT) -> None:
    """Before a bake of jobs on kit's builder: every base in its image store (the engine's, for a docker-driver
    builder) or served by its registry, every wheel in the wheelhouse; else InputError (exit 2) naming each
    missing one and the command that makes it (builder.buildkit.preflight)."""
    needs = [need for job in jobs if (need := job.need()) is not None]
    matrix = next((job.matrix for job in jobs if job.matrix is not None), None)
    fetch = f"--matrix {matrix}" if matrix is not None else "--matrix MATRIX"
    if needs:
        preflight.require(needs, source.wheelhouse, fetch,
                       builders.has_image(kit) or preflight.engine_has(connect()), images.serves(), builders.store(kit))


def by_combination(todo: list[Job]) -> dict[str, list[Job]]:
    groups: dict[str, list[Job]] = {}
    for job in todo:
        groups.setdefault(job.combination, []).append(job)
    return groups


def shard_jobs(todo: list[Job], spec: str | None) -> list[Job]:
    """--shard K/N: the K-th of N interleaved slices of the combinations, each combination's images together (one
    bake shares their stages)."""
    if spec is None:
        return todo
    kept = set(shard(list(by_combination(todo)), spec))
    return [j for j in todo if j.combination in kept]
