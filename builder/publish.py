"""Scheduled publishing: build what changed, validate it, push it under an immutable tag, then move tags.

Per image:
1. Render it and compute its content hash; its immutable tag is `<image tag>-<first 12 hex of the hash>`.
2. Ask the registry for that immutable tag. Present: the image is unchanged, nothing is built or pushed;
   only moving tags that point elsewhere are moved to its digest.
3. Absent: build it (or reuse the local image with the same hash), validate it, push it under the immutable
   tag, and only then point the moving tags (each cell's readable tag, `latest` for the newest all-targets
   runtime image of the default OS) at that exact digest, registry-side. A failure anywhere before leaves
   the moving tags on the previous good image; a tag never points at a manifest that is not there.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.errors import ImageNotFound
from packaging.version import Version

from builder import credentials as creds
from builder.build import build_image
from builder.context import write_context
from builder.pipeline import local_ref
from builder.plan import ImagePlan, plan_images
from builder.push import push_image
from builder.registry import RegistryClient, RegistryError
from builder.render import HASH_LABEL, RenderedCell, WheelSource, render_cell
from builder.spec import ALL_TARGETS, CellSpec
from builder.validate import validate_image

LATEST = "latest"


@dataclass
class CellRecord:
    """One image's outcome, as written to the run record (the catalog's input)."""

    image: str
    tags: list[str]
    immutable_tag: str
    content_hash: str
    state: str = "planned"  # built | skipped | failed | would-build | would-skip
    digest: str | None = None
    previous_digest: str | None = None
    moved: list[str] = field(default_factory=list)
    failure: str | None = None
    failed_checks: list[str] = field(default_factory=list)
    validation: list[dict[str, str]] = field(default_factory=list)
    image_bytes: int | None = None
    compressed_bytes: int | None = None
    pushed: bool = False
    seconds: float = 0.0


def immutable_tag(rendered: RenderedCell) -> str:
    return f"{rendered.cell.tag}-{rendered.content_hash.removeprefix('sha256:')[:12]}"


def latest_cell(cells: list[CellSpec], default_os: str) -> CellSpec | None:
    """`latest`: the newest all-targets runtime ROCm image on the default OS (cpu when there is no ROCm)."""
    candidates = [c for c in cells if c.os == default_os and c.flavor == "runtime"
                  and c.content_cell().gfx in (ALL_TARGETS, None) and not c.explicit_tag]
    if not candidates:
        return None
    return max(candidates, key=lambda c: (c.rocm is not None, Version(c.torch), Version(c.rocm or "0")))


@dataclass
class Publisher:
    client: docker.DockerClient
    registry: str  # REGISTRY/NAMESPACE
    source: WheelSource = field(default_factory=WheelSource)
    dry_run: bool = False
    on_stage: Callable[[str, str], None] = lambda tag, stage: None
    on_line: Callable[[str, str], None] = lambda tag, line: None

    def __post_init__(self) -> None:
        self.host = creds.registry_host(self.registry)
        self.namespace = self.registry[len(self.host):].strip("/")
        self.api = RegistryClient(self.host, creds.lookup(self.registry))

    def repository(self, cell: CellSpec) -> str:
        return f"{self.namespace}/{cell.image}" if self.namespace else cell.image

    def publish(self, cells: list[CellSpec], all_cells: list[CellSpec], default_os: str,
                workdir: Path) -> list[CellRecord]:
        latest = latest_cell(all_cells, default_os)
        records = []
        for plan in plan_images(cells):
            tags = plan.tags + ([LATEST] if latest is not None and latest in plan.cells else [])
            start = time.monotonic()
            record = self._publish_one(plan, tags, workdir / plan.content.tag)
            record.seconds = round(time.monotonic() - start, 3)
            records.append(record)
        return records

    def _publish_one(self, plan: ImagePlan, tags: list[str], context_dir: Path) -> CellRecord:
        cell = plan.content
        rendered = render_cell(cell, self.source)
        record = CellRecord(cell.tag, tags, immutable_tag(rendered), rendered.content_hash)
        repo = self.repository(cell)
        try:
            published = self.api.manifest(repo, record.immutable_tag)
            record.previous_digest = self.api.digest(repo, cell.tag)
            if published is not None:
                record.state = "would-skip" if self.dry_run else "skipped"
                record.digest = published.digest
                self._move_tags(record, repo, published)
                return record
            if self.dry_run:
                record.state = "would-build"
                record.moved = list(tags)
                return record
            self._build_validate_push(record, rendered, context_dir, repo)
        except RegistryError as exc:  # AuthError included: the message names registry and user, not the secret
            record.state, record.failure = "failed", str(exc)
        return record

    def _build_validate_push(self, record: CellRecord, rendered: RenderedCell, context_dir: Path,
                             repo: str) -> None:
        cell = rendered.cell
        ref = local_ref(cell)
        if not self._local_image_matches(ref, rendered.content_hash):
            self.on_stage(cell.tag, "build")
            built = build_image(self.client, rendered, write_context(rendered, context_dir), ref,
                                lambda line: self.on_line(cell.tag, line))
            if not built.ok:
                record.state, record.failure = "failed", f"build: {built.error}"
                return
        self.on_stage(cell.tag, "validate")
        validation = validate_image(self.client, ref, cell.expectations(), rendered.labels)
        record.validation = [asdict(c) for c in validation.checks]
        record.image_bytes = int(self.client.images.get(ref).attrs["Size"])
        if not validation.ok:
            record.state, record.failure = "failed", "validation"
            record.failed_checks = [f"{c.suite}/{c.name}: {c.detail}" for c in validation.failures]
            return
        self.on_stage(cell.tag, "push")
        pushed = push_image(self.client, ref, f"{self.host}/{repo}", record.immutable_tag)
        if not pushed.ok:
            record.state, record.failure = "failed", f"push: {pushed.error}"
            return
        record.pushed, record.digest = True, pushed.digest
        manifest = self.api.manifest(repo, record.immutable_tag)
        if manifest is None or manifest.digest != pushed.digest:
            raise RegistryError(f"{self.host}/{repo}:{record.immutable_tag} is not the digest just pushed")
        record.state = "built"
        self._move_tags(record, repo, manifest)

    def _local_image_matches(self, ref: str, content_hash: str) -> bool:
        """A rerun after a failed push reuses the image it already built (same content hash)."""
        try:
            labels = self.client.images.get(ref).labels or {}
        except ImageNotFound:
            return False
        return labels.get(HASH_LABEL) == content_hash

    def _move_tags(self, record: CellRecord, repo: str, manifest: Any) -> None:
        record.compressed_bytes = _compressed_size(manifest.body)
        for tag in record.tags:
            if self.api.digest(repo, tag) == manifest.digest:
                continue
            record.moved.append(tag)
            if not self.dry_run:
                self.on_stage(record.image, f"tag {tag}")
                self.api.put_tag(repo, tag, manifest)


def _compressed_size(body: bytes) -> int | None:
    try:
        data = json.loads(body)
        return int(data["config"]["size"]) + sum(int(layer["size"]) for layer in data["layers"])
    except (ValueError, KeyError, TypeError):
        return None


def write_record(path: Path, registry: str, records: list[CellRecord]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"registry": registry, "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                "cells": [asdict(r) for r in records]}, indent=2))
