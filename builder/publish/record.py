"""One image's record, the step results it is assembled from, and the JSON file the records become.

Each step of an image's lifecycle (bake, validation, SBOM, push, attach, promotion) returns one small frozen result
below: its digests, its figures and its verdict. builder.pipeline.lifecycle alone assembles an ImageReport from
them (a new frozen record per result, so an interrupted run records what was assembled so far).
`builder build --report`, `builder push --report` and `builder publish --record` all write this same record, so
the catalog (builder.site.records reads it through its own model) and the workflows read one format whatever
command produced it.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from builder.core import safefs
from builder.registry.client import Manifest
from builder.validate.runner import Check
from builder.validate.sbom import Sbom

State = Literal["planned", "not-attempted", "built", "validated", "published", "skipped", "failed",
                "would-build", "would-skip"]
Stage = Literal["build", "validate", "sbom", "push", "registry"]


@dataclass(frozen=True, kw_only=True)
class Built:
    """The bake's image (or one already in the engine) taken for the lifecycle; failure: there is none to go on
    with."""

    image_id: str | None = None
    image_bytes: int | None = None  # installed (unpacked)
    loaded_bytes: int | None = None  # streamed into the engine for it; None: not loaded
    seconds: float | None = None  # the bake's
    log_tail: tuple[str, ...] = ()
    failure: str | None = None


@dataclass(frozen=True, kw_only=True)
class Validated:
    """The image's checks; failure: one failed."""

    checks: tuple[Check, ...]
    seconds: float
    packages: tuple[str, ...] = ()  # `name==version` of the image's Python environment
    failure: str | None = None
    reused: str | None = None  # when the pass taken from builder.validate.reuse ran (UTC); None: it ran now
    # What builder.validate.sbom.inspect read beside the checks (the SBOM step makes its document from them), or
    # why it could not; not in the run record.
    facts: dict[str, Any] | str | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class Inventoried:
    """The SBOM made from the image (builder.validate.sbom); image_id: the local image it was made from."""

    image_id: str
    sbom: Sbom


@dataclass(frozen=True, kw_only=True)
class Pushed:
    """The image under its immutable tag: uploaded by this run, or found there (uploaded False, 0 bytes).
    failure: the registry refused what was uploaded (manifest is then None)."""

    manifest: Manifest | None
    uploaded: bool = False
    pushed_bytes: int | None = None
    failure: str | None = None

    @property
    def digest(self) -> str | None:
        return self.manifest.digest if self.manifest is not None else None


@dataclass(frozen=True, kw_only=True)
class Attached:
    """An artifact attached to the pushed manifest: the SBOM (sbom_digest: its blob) or the lock record."""

    kind: Literal["sbom", "lock"]
    artifact: str  # the artifact manifest's digest
    sbom_digest: str | None = None


@dataclass(frozen=True, kw_only=True)
class Promoted:
    """The moving tags moved to digest, registry-side; failure: a look-up or move failed after `moved`."""

    digest: str
    compressed_bytes: int | None
    previous_digest: str | None = None  # where the image's own tag pointed before
    moved: tuple[str, ...] = ()  # only those moved (or, dry run, to move): a failed move is never listed
    failure: str | None = None


@dataclass(frozen=True, kw_only=True)
class Failed:
    """A step that failed with nothing else to record; digest: the manifest it failed on, when pushed."""

    stage: Stage
    why: str
    digest: str | None = None


Result = Built | Validated | Inventoried | Pushed | Attached | Promoted | Failed


@dataclass(frozen=True, kw_only=True)
class ImageReport:
    """What happened to one image: the cells it serves, each stage's outcome, where it was published. Assembled
    by builder.pipeline.lifecycle from the steps' results; never changed once made."""

    tag: str  # the image's own (content) tag
    repository: str  # the image name in a registry namespace, e.g. pytorch
    tags: tuple[str, ...]  # every moving tag it gets: its cells' tags (and `latest`)
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
    validation: tuple[Check, ...] = ()
    validation_reused: str | None = None  # the checks were not run again: a pass of the same image at this time
    pushed: bool = False  # layers went to the registry in this run
    pushed_bytes: int | None = None  # what this run uploaded (blobs the registry lacked); None: no push tried
    digest: str | None = None
    previous_digest: str | None = None  # where the image's own tag pointed before this run
    moved: tuple[str, ...] = ()
    compressed_bytes: int | None = None
    log_tail: tuple[str, ...] = ()
    packages: tuple[str, ...] = ()  # `name==version` of the image's Python environment
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

    def as_json(self) -> dict[str, Any]:
        row = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()}
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
