"""One result type for every image a run touches, and the JSON file it becomes.

`builder build --report`, `builder push --report` and `builder publish --record` all write this same
record, so the catalog and the workflows read one format whatever command produced it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from builder.core import safefs
from builder.validate.runner import Check

State = Literal["planned", "not-attempted", "built", "validated", "published", "skipped", "failed",
                "would-build", "would-skip"]
Stage = Literal["build", "validate", "sbom", "push", "registry"]


@dataclass(kw_only=True)
class ImageReport:
    """What happened to one image: the cells it serves, each stage's outcome, where it was published."""

    tag: str  # the image's own (content) tag
    repository: str  # the image name in a registry namespace, e.g. pytorch
    tags: list[str]  # every moving tag it gets: its cells' tags (and `latest`)
    immutable_tag: str
    content_hash: str
    state: State = "planned"
    failed_stage: Stage | None = None
    failure: str | None = None
    local_image: str | None = None  # where it was built in the local engine
    image_id: str | None = None
    image_bytes: int | None = None
    loaded_bytes: int | None = None  # streamed into the engine for it (the blobs it lacked); None: not loaded
    build_seconds: float | None = None
    validate_seconds: float | None = None
    validation: list[Check] = field(default_factory=list)
    pushed: bool = False  # layers went to the registry in this run
    pushed_bytes: int | None = None  # what this run uploaded (blobs the registry lacked); None: no push tried
    digest: str | None = None
    previous_digest: str | None = None  # where the image's own tag pointed before this run
    moved: list[str] = field(default_factory=list)
    compressed_bytes: int | None = None
    log_tail: list[str] = field(default_factory=list)
    packages: list[str] = field(default_factory=list)  # `name==version` of the image's Python environment
    sbom_digest: str | None = None  # the CycloneDX SBOM blob generated from the image (builder.validate.sbom)
    sbom_packages: int | None = None  # how many packages it lists (OS and Python)
    sbom_artifact: str | None = None  # the registry artifact (manifest digest) that attaches it to `digest`
    lock_artifact: str | None = None  # the artifact that records the lock it was built from (locked images only)
    seconds: float = 0.0

    @property
    def failed(self) -> bool:
        return self.state == "failed"

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.validation if c.status == "fail"]

    def fail(self, stage: Stage, why: str) -> None:
        self.state, self.failed_stage, self.failure = "failed", stage, why

    def as_json(self) -> dict[str, Any]:
        row = asdict(self)
        row["failed_checks"] = [f"{c.suite}/{c.name}: {c.detail}" for c in self.failed_checks]
        return row


def write(path: Path, reports: list[ImageReport], registry: str | None = None, finished: bool = True,
          extra: dict[str, object] | None = None) -> None:
    """The run record; written whatever happened, so every selected image is accounted for (a planted link or
    FIFO at path is replaced, never written through; a full disk is one safefs.OutputError). extra: more
    top-level keys (a plan's shared stages to build)."""
    data = {"registry": registry, "complete": finished,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "images": [r.as_json() for r in reports], **(extra or {})}
    safefs.write_named(path, json.dumps(data, indent=2).encode(), "the run record")
