"""Where a bake's images go: one OCI layout for every target, BuildKit's cache in a registry, and the engine.

When the builder is the engine's own BuildKit (the docker driver of the engine DOCKER_HOST names, on its containerd
image store), the images go straight into that store instead: no layout beside them on the disk, nothing streamed
(a ROCm image is GBs written once more and read back). The manifest is the same either way: the provenance
attestation the image exporter would wrap it in is turned off, so the engine's image ID is still the manifest digest.

The layers' file times are constant (each RUN of the template sets what it wrote to time 0) and the config's come
from SOURCE_DATE_EPOCH, so the same inputs give the same manifest digest on any engine; the engine's containerd
image store keeps that digest as the image's ID when the image is loaded from the layout.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
from docker.errors import DockerException

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
    # cache tags every target also imports: an earlier wave's targets (publish --by-family), whose cache holds the
    # shared stages once BuildKit's own records of them are pruned
    earlier: tuple[str, ...] = field(default=(), compare=False)

    def attributes(self, tag: str, export: bool, compression: str) -> str:
        """BuildKit's cache attributes for one cache tag (a bake target, or a shared stage's key)."""
        extra = ",registry.insecure=true" if self.insecure else ""
        if export:
            extra += f",mode=max,image-manifest=true,oci-mediatypes=true,compression={compression},ignore-error=true"
        return f"type=registry,ref={self.ref}:{tag}{extra}"

    def imports(self, target: str, compression: str) -> list[str]:
        """What target imports: its own cache, then the shared stages it is built through, then an earlier
        wave's."""
        tags = dict.fromkeys((target, *self.stages.get(target, ()), *self.earlier))
        return [self.attributes(tag, False, compression) for tag in tags]


@dataclass(frozen=True)
class Export:
    """Where a bake exports: one OCI layout folder for every target (shared layers written once), then the engine."""

    layout: Path
    compression: str = "gzip"
    load: bool = True  # False: the images stay in the layout (builder reproduce compares them there)
    cache: Cache | None = None
    direct: bool = False  # into the builder's own engine (store_direct): no layout is written

    @property
    def writes_layout(self) -> bool:
        return not self.direct

    def output(self, name: str) -> str:
        # No force-compression and no rewrite-timestamp: a layer already compressed (the base's, a cached step's)
        # is reused as it is. rewrite-timestamp recompresses every layer on every export, cached or not (27 s of
        # a 34 s warm bake of a CPU torch image; minutes for a ROCm one), for times the template already set.
        if self.direct:  # named by the target's tags in the bake file
            return f"type=image,oci-mediatypes=true,compression={self.compression}"
        return (f"type=oci,tar=false,dest={self.layout},name={name},oci-mediatypes=true,"
                f"compression={self.compression}")

    def target(self, target: str, name: str) -> dict[str, Any]:
        """The bake keys that export target as name, and import and export its cache."""
        keys: dict[str, Any] = {"output": [self.output(name)]}
        if self.direct:
            keys["attest"] = ["type=provenance,disabled=true"]
        if self.cache is not None:
            keys["cache-from"] = self.cache.imports(target, self.compression)
            if self.cache.write:
                keys["cache-to"] = [self.cache.attributes(target, True, self.compression)]
        return keys

    def take(self, refs: list[str], digest: str) -> Taken:
        """The image baked as refs[-1] (bake said its manifest is digest), loaded under refs (or, not loaded, left
        in the layout; or already in the engine); ExportError when it cannot be had."""
        if self.direct:
            return _in_engine(refs[-1], digest)
        try:
            image = ocilayout.find(self.layout, refs[-1])
            loaded = ocilayout.load(connect(), image, refs) if self.load else ocilayout.Loaded(image.digest, 0)
        except (IndexError, ocilayout.LayoutError, EngineUnavailable, OSError) as exc:
            raise ExportError(str(exc)) from exc
        return Taken(loaded.image_id, image.digest, loaded.streamed,
                     tuple(dict.fromkeys([image.config.digest, *(b.digest for b in image.layers)])))


def store_direct(client: docker.DockerClient) -> bool:
    """Whether an image the engine's own BuildKit exports lands in its containerd image store, under its manifest
    digest (a graph driver's store would name it by its config)."""
    try:
        status = client.info().get("DriverStatus") or []
    except DockerException:
        return False
    return any(isinstance(row, list) and row == ["driver-type", "io.containerd.snapshotter.v1"] for row in status)


def _in_engine(ref: str, digest: str) -> Taken:
    """An image the bake exported into the engine: there under ref as its manifest digest, or ExportError."""
    try:
        held = connect().images.get(ref).id
    except (EngineUnavailable, DockerException) as exc:
        raise ExportError(f"the engine does not hold {ref}: {exc}") from exc
    if held != digest:
        raise ExportError(f"the engine holds {ref} as {held}, not the built manifest {digest}")
    return Taken(digest, digest, 0, ())


@dataclass(frozen=True)
class Taken:
    """A baked image taken from the layout: its ID in the engine (or, not loaded, its manifest digest), its
    manifest digest, the bytes streamed into the engine for it, and its blobs (config and layers)."""

    image_id: str
    manifest_digest: str
    streamed: int
    blobs: tuple[str, ...]
