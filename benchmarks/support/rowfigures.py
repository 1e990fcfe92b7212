"""What the row benchmark (bench_row.py) prints: disk, bytes into the engine, bytes uploaded, time, and the
plan's peak-disk estimate, each against its target (issue 37).

"Final images" is the measure every run of this benchmark has used: what the engine holds at the end, plus, for
the images --by-family removed on the way, twice the compressed bytes of the layers only they had (content and
unpacked: the payload is incompressible); each layer once. It undercounts what one containerd store would hold
for the whole row: that store keys a snapshot by its chain ID, so a layer that is the same bytes in every family
(the devel toolchain) is unpacked again on each family's chain. That footprint is printed beside it, computed
from the registry (the published images' manifests and configs, each blob once, each layer's decompressed tar
stream once per chain): it is how builder.publish.sizes counts a row (a devel part per family).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib
import json
import subprocess
import urllib.request
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from benchmarks.support.localregistry import MANIFEST_TYPES, LocalRegistry
from benchmarks.support.scaleplumbing import size

BASE_LAYERS = 1  # debian:12 is one layer: every image's first


@dataclass(frozen=True)
class Measured:
    returncode: int
    record: Path
    registry: LocalRegistry
    uploaded: int  # bytes clients sent to the registry (the counting proxy)
    wall: float
    budget: int  # the scaled runner disk
    empty: int  # used bytes of the loop filesystem before the engine started
    before: int  # ... once the engine holds the base image, before the publish
    peak: int  # ... the largest seen during the publish
    final: int  # ... after it, BuildKit's cache pruned: the images the engine still holds
    held: frozenset[str]  # the image IDs (manifest digests) the engine holds at the end


@dataclass(frozen=True)
class Figures:
    measured: Measured
    images: int
    published: int
    streamed: int  # bytes of the archives loaded into the engine
    new: int  # the row's own blobs: configs and layers above the base, each once
    stored: int  # bytes the registry keeps (each blob once)
    released: int  # compressed bytes of the layers only released images had (publish --by-family)
    estimate: int | None  # the plan's peak for the row's bytes, when builder.publish.sizes has PEAK_FACTOR
    footprint: int = 0  # the row's images in one store: each blob once, each layer unpacked once per chain

    @property
    def row_images(self) -> int:
        """The row's images in one engine, each layer once: what the engine holds at the end, and the layers of
        the images released on the way, twice (content and unpacked: their payload is incompressible)."""
        return self.measured.final - self.measured.empty + 2 * self.released


def _get(registry: LocalRegistry, path: str, accept: str) -> dict[str, Any]:
    request = urllib.request.Request(f"http://{registry.address}{path}", headers={"Accept": accept})
    with urllib.request.urlopen(request, timeout=60) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def manifest_of(registry: LocalRegistry, row: dict[str, Any]) -> dict[str, Any]:
    """A published image's manifest, as the registry serves it."""
    return _get(registry, f"/v2/bench/{row['repository']}/manifests/{row['digest']}", MANIFEST_TYPES)


def image_blobs(manifest: dict[str, Any]) -> dict[str, int]:
    """digest -> size of a published image's config and layers above the base."""
    return {str(b["digest"]): int(b["size"]) for b in [manifest["config"], *manifest["layers"][BASE_LAYERS:]]}


class _Readable(Protocol):
    def read(self, size: int, /) -> bytes: ...


def _unpacked(path: Path, media_type: str) -> int:
    """The bytes of a layer's tar stream: what unpacking it writes (file contents, tar headers)."""
    if media_type.endswith("zstd"):
        with subprocess.Popen(["zstd", "-dc", str(path)], stdout=subprocess.PIPE) as proc:
            assert proc.stdout is not None
            return _count(proc.stdout)
    if media_type.endswith("gzip"):
        with gzip.open(path, "rb") as stream:
            return _count(stream)
    with path.open("rb") as plain:
        return _count(plain)


def _count(stream: _Readable) -> int:
    total = 0
    while chunk := stream.read(1 << 20):
        total += len(chunk)
    return total


def footprint(registry: LocalRegistry, manifests: list[dict[str, Any]]) -> int:
    """The published images in one containerd store: every blob (config, layers) once, and every chain's top
    layer unpacked (chain IDs as the OCI image spec defines them, from the configs' diff IDs)."""
    blobs: dict[str, int] = {}
    chains: dict[str, tuple[str, str]] = {}  # chain ID -> (layer digest, media type)
    for manifest in manifests:
        config = json.loads(registry.blob_path(manifest["config"]["digest"]).read_bytes())
        blobs[manifest["config"]["digest"]] = int(manifest["config"]["size"])
        chain = ""
        for layer, diff_id in zip(manifest["layers"], config["rootfs"]["diff_ids"], strict=True):
            blobs[layer["digest"]] = int(layer["size"])
            chain = diff_id if not chain else "sha256:" + hashlib.sha256(f"{chain} {diff_id}".encode()).hexdigest()
            chains[chain] = (layer["digest"], layer["mediaType"])
    unpacked = {d: _unpacked(registry.blob_path(d), t) for d, t in set(chains.values())}
    return sum(blobs.values()) + sum(unpacked[d] for d, _ in chains.values())


def peak_factor() -> float | None:
    try:  # the other half of issue 37 (the plan's sizes): not on every branch
        sizes = importlib.import_module("builder.publish.sizes")
    except ImportError:
        return None
    found = getattr(sizes, "PEAK_FACTOR", None)
    return float(found) if found is not None else None


def collect(m: Measured) -> Figures:
    rows = json.loads(m.record.read_text())["images"] if m.record.is_file() else []
    published = [r for r in rows if r.get("digest")]
    manifests = {r["digest"]: manifest_of(m.registry, r) for r in published}
    blobs = {digest: image_blobs(manifest) for digest, manifest in manifests.items()}
    own = {d: n for found in blobs.values() for d, n in found.items()}
    kept = {d for digest, found in blobs.items() if digest in m.held for d in found}
    factor = peak_factor()
    figures = Figures(m, len(rows), len(published), sum(int(r.get("loaded_bytes") or 0) for r in rows),
                      sum(own.values()), m.registry.stored_bytes(),
                      sum(n for d, n in own.items() if d not in kept), None,
                      footprint(m.registry, list(manifests.values())))
    return replace(figures, estimate=int(factor * figures.row_images) if factor else None)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def print_figures(f: Figures) -> None:
    m = f.measured
    peak, final = m.peak - m.empty, f.row_images
    lines = [
        f"publish exit {m.returncode}: {f.published}/{f.images} images published",
        f"peak disk / budget:               {_ratio(peak, m.budget)} ({size(peak)} / {size(m.budget)})",
        f"peak disk / final images:         {_ratio(peak, final)} ({size(peak)} / {size(final)})   target <= 1.3",
        f"  (the row's images in one store, each layer unpacked once per chain it is on: {size(f.footprint)}; "
        f"peak / that {_ratio(peak, f.footprint)})",
        f"streamed into engine / own new:   {_ratio(f.streamed, f.new)} ({size(f.streamed)} / {size(f.new)})"
        "   target <= 1.05",
        f"uploaded / new bytes:             {_ratio(m.uploaded, f.stored)} ({size(m.uploaded)} / {size(f.stored)})"
        "   target <= 1.05",
        f"wall time:                        {m.wall:.0f} s",
    ]
    if f.estimate is None:
        lines.append("plan's estimate vs measured peak: the per-wave model (builder.publish.sizes.peak_of) against "
                     "this run's peak is tests/publish/test_sizes.py's: add the run's figure there")
    else:
        lines.append(f"plan's estimate / measured peak:  {_ratio(f.estimate, peak)} ({size(f.estimate)} / "
                     f"{size(peak)}: PEAK_FACTOR x the row's images on the store)"
                     "   target within 20%")
    print("\n".join(lines))
