"""Where a bake's images go: one OCI layout for every target, BuildKit's cache in a registry, and the engine.

The layers' file times are constant (each RUN of the template sets what it wrote to time 0) and the config's come
from SOURCE_DATE_EPOCH, so the same inputs give the same manifest digest on any engine; the engine's containerd
image store keeps that digest as the image's ID when the image is loaded from the layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from builder.buildkit import ocilayout
from builder.buildkit.engine import EngineUnavailable, connect


class ExportError(RuntimeError):
    """A baked image cannot be taken from the layout (missing, unreadable) or loaded into the engine."""


@dataclass(frozen=True)
class Cache:
    """BuildKit's cache kept in a registry (`<ref>:<target>`, every stage: mode=max), so a cold runner rebuilding
    a combination after a small change takes the unchanged steps (torch) from there instead of running them."""

    ref: str  # REGISTRY/NAMESPACE/REPOSITORY
    insecure: bool = False  # plain HTTP: loopback or a host named with --insecure-registry
    write: bool = True  # False (publish --no-push): import only, the registry is never written to
    # target -> the shared stages (builder.render.sharedstages keys) it also imports: those a first wave exported
    stages: dict[str, tuple[str, ...]] = field(default_factory=dict, hash=False, compare=False)

    def attributes(self, tag: str, export: bool, compression: str) -> str:
        """BuildKit's cache attributes for one cache tag (a bake target, or a shared stage's key)."""
        extra = ",registry.insecure=true" if self.insecure else ""
        if export:
            extra += f",mode=max,image-manifest=true,oci-mediatypes=true,compression={compression},ignore-error=true"
        return f"type=registry,ref={self.ref}:{tag}{extra}"

    def imports(self, target: str, compression: str) -> list[str]:
        """What target imports: its own cache, then the shared stages it is built through."""
        return [self.attributes(tag, False, compression) for tag in (target, *self.stages.get(target, ()))]


@dataclass(frozen=True)
class Export:
    """Where a bake exports: one OCI layout folder for every target (shared layers written once), then the engine."""

    layout: Path
    compression: str = "gzip"
    load: bool = True  # False: the images stay in the layout (builder reproduce compares them there)
    cache: Cache | None = None

    def output(self, name: str) -> str:
        # No force-compression and no rewrite-timestamp: a layer already compressed (the base's, a cached step's)
        # is reused as it is. rewrite-timestamp recompresses every layer on every export, cached or not (27 s of
        # a 34 s warm bake of a CPU torch image; minutes for a ROCm one), for times the template already set.
        return (f"type=oci,tar=false,dest={self.layout},name={name},oci-mediatypes=true,"
                f"compression={self.compression}")

    def target(self, target: str, name: str) -> dict[str, Any]:
        """The bake keys that export target as name, and import and export its cache."""
        keys: dict[str, Any] = {"output": [self.output(name)]}
        if self.cache is not None:
            keys["cache-from"] = self.cache.imports(target, self.compression)
            if self.cache.write:
                keys["cache-to"] = [self.cache.attributes(target, True, self.compression)]
        return keys

    def take(self, refs: list[str]) -> Taken:
        """The image baked as refs[-1], loaded under refs (or, not loaded, left in the layout); ExportError when
        it cannot be had."""
        try:
            image = ocilayout.find(self.layout, refs[-1])
            loaded = ocilayout.load(connect(), image, refs) if self.load else ocilayout.Loaded(image.digest, 0)
        except (IndexError, ocilayout.LayoutError, EngineUnavailable, OSError) as exc:
            raise ExportError(str(exc)) from exc
        return Taken(loaded.image_id, image.digest, loaded.streamed,
                     tuple(dict.fromkeys([image.config.digest, *(b.digest for b in image.layers)])))


@dataclass(frozen=True)
class Taken:
    """A baked image taken from the layout: its ID in the engine (or, not loaded, its manifest digest), its
    manifest digest, the bytes streamed into the engine for it, and its blobs (config and layers)."""

    image_id: str
    manifest_digest: str
    streamed: int
    blobs: tuple[str, ...]
