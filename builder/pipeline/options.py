"""A run's settings by concern, each resolved once at the command line: what a bake needs, what validation needs,
what a push needs. A function gets only the part it uses, so the registry travels only to the code that talks to
it (the push), never through the bake, the render or the locks.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from builder.buildkit.builders import CURRENT, BuildKit
from builder.buildkit.export import Cache
from builder.publish.promote import Target
from builder.render.sources import WheelSource


@dataclass(frozen=True, kw_only=True)
class BakeOptions:
    """What a bake needs: the wheels, the builder, the layers' compression and BuildKit's registry cache."""

    source: WheelSource = field(default_factory=WheelSource)
    compression: str = "gzip"  # the layers' compression (gzip: every client pulls it; zstd: Docker 23+)
    # BuildKit's cache, imported from and exported to a registry (cold runners); write=False (--no-push): import only
    cache: Cache | None = None
    buildkit: BuildKit = CURRENT  # the builder that bakes (--builder) and its RUN steps' network
    row_of: dict[str, str] = field(default_factory=dict)  # builder stages: image tag -> its workflow row
    by_family: bool = False  # publish --by-family: one GPU family at a time, each leaving the engine after the next


@dataclass(frozen=True, kw_only=True)
class ValidateOptions:
    """What validation needs: where the checks run."""

    gpu: bool = False
    apptainer: bool = False  # also under Apptainer (builder.validate.apptainer): off, a second conversion costs time
    # take a pass already on record for the same image, expectations, checks and engine (builder.validate.reuse);
    # off for `builder test` and --revalidate, which always run the checks
    reuse: bool = False


@dataclass(frozen=True, kw_only=True)
class PushOptions:
    """What a push needs: the registry target and what may be written to it."""

    target: Target  # where validated images are pushed
    skip_published: bool = False  # publish: content already under its immutable tag is not built again
    no_push: bool = False  # publish --no-push: build and validate what changed; write nothing to the registry
    sbom: bool = True  # an SBOM from each validated image, attached to it before its tags move


@dataclass(frozen=True, kw_only=True)
class Options:
    """The three parts of one run; validate None: no validation, push None: nowhere to push."""

    bake: BakeOptions = field(default_factory=BakeOptions)
    validate: ValidateOptions | None = field(default_factory=ValidateOptions)
    push: PushOptions | None = None
