"""What the row benchmark (bench_row.py) prints and records: disk, bytes into the engine, bytes uploaded, time, and
the plan's per-wave peak model (builder.publish.sizes.peak_of) fed this row's parts, each against its target.

"Final images" is the measure every run of this benchmark has used: what the engine holds at the end, plus, for
the images --by-family removed on the way, the layers only they had, blob and unpacked (read from the registry:
with compressible wheels the two differ); each layer once. It undercounts what one containerd store would hold
for the whole row: that store keys a snapshot by its chain ID, so a layer that is the same bytes in every family
(the devel toolchain) is unpacked again on each family's chain. That footprint is printed beside it, computed
from the registry (the published images' manifests and configs, each blob once, each layer's decompressed tar
stream once per chain): it is how builder.publish.sizes counts a row (a devel part per family).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from benchmarks.support.localregistry import MANIFEST_TYPES, LocalRegistry
from benchmarks.support.scaleplumbing import size
from builder.publish import sizes

BASE_LAYERS = 1  # debian:12 is one layer: every image's first
# What no scale shrinks, as the model counts it: debian:12 (51 MB compressed, 133 MB unpacked) and the devel
# toolchain from the Debian mirror (190 MB compressed, 572 MB unpacked), measured on this machine
# (docs/benchmarks.md "The largest row on a runner-sized disk"); tests/publish/test_sizes.py uses the same figures.
BASE = sizes.Layer(51_000_000, 133_000_000)
DEVEL = sizes.Layer(190_000_000, 572_000_000)


@dataclass(frozen=True)
class Row:
    """What the per-wave model needs of a bench_row run: its families in the waves' order with their gfx target
    counts, the installed bytes every family shares (torch and the ROCm libraries) and of one target's device
    package, and the payload's installed/compressed ratio."""

    families: tuple[tuple[str, int], ...]
    shared: int
    device: int
    ratio: float

    def images(self) -> list[sizes.ImageSize]:
        """The row as builder.publish.sizes sees it: every runtime image, then every devel one (the matrix's
        order), each wheel part's compressed bytes its installed bytes over the ratio."""
        def part(installed: int) -> sizes.Layer:
            return sizes.Layer(int(installed / self.ratio), installed)

        out = []
        for runtime in (True, False):
            for family, targets in self.families:
                parts = {("base", "g"): BASE, ("torch", "g"): part(self.shared),
                         ("device", "g", family): part(self.device * targets)}
                if not runtime:
                    parts[("devel", "g", family)] = DEVEL
                out.append(sizes.ImageSize(f"{family}-{'runtime' if runtime else 'devel'}", parts, "g", family,
                                           runtime))
        return out

    def peak(self) -> int:
        return sizes.peak_of(self.images())


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
    released: int  # blob and unpacked bytes of the layers only released images had (publish --by-family)
    estimate: int | None  # the per-wave model's peak for this row (Row.peak), when the run gave its Row
    footprint: int = 0  # the row's images in one store: each blob once, each layer unpacked once per chain

    @property
    def peak(self) -> int:
        """The publish's peak on the loop filesystem, above what it held before the engine started."""
        return self.measured.peak - self.measured.empty

    @property
    def row_images(self) -> int:
        """The row's images in one engine, each layer once: what the engine holds at the end, and the layers of
        the images released on the way (blob and unpacked)."""
        return self.measured.final - self.measured.empty + self.released


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


def released(registry: LocalRegistry, manifests: dict[str, dict[str, Any]], held: frozenset[str]) -> int:
    """Blob and unpacked bytes of the configs and layers (above the base) that only images no longer held had."""
    kept = {d for digest, found in manifests.items() if digest in held for d in image_blobs(found)}
    gone: dict[str, int] = {}
    for manifest in manifests.values():
        gone[manifest["config"]["digest"]] = 2 * int(manifest["config"]["size"])
        for layer in manifest["layers"][BASE_LAYERS:]:
            if layer["digest"] not in kept and layer["digest"] not in gone:
                gone[layer["digest"]] = int(layer["size"]) + _unpacked(registry.blob_path(layer["digest"]),
                                                                       layer["mediaType"])
    return sum(n for d, n in gone.items() if d not in kept)


def collect(m: Measured, row: Row | None = None) -> Figures:
    rows = json.loads(m.record.read_text())["images"] if m.record.is_file() else []
    published = [r for r in rows if r.get("digest")]
    manifests = {r["digest"]: manifest_of(m.registry, r) for r in published}
    own = {d: n for manifest in manifests.values() for d, n in image_blobs(manifest).items()}
    return Figures(m, len(rows), len(published), sum(int(r.get("loaded_bytes") or 0) for r in rows),
                   sum(own.values()), m.registry.stored_bytes(), released(m.registry, manifests, m.held),
                   row.peak() if row is not None else None, footprint(m.registry, list(manifests.values())))


def recorded(f: Figures, row: Row | None) -> dict[str, float]:
    """The figures results.record keeps for a run (seconds, bytes, counts, ratios; names say the unit)."""
    m = f.measured
    out = {"publish_exit": float(m.returncode), "images": float(f.images), "published": float(f.published),
           "wall_s": round(m.wall, 1), "peak_bytes": float(f.peak), "budget_bytes": float(m.budget),
           "uploaded_bytes": float(m.uploaded), "new_bytes": float(f.new), "stored_bytes": float(f.stored),
           "streamed_bytes": float(f.streamed), "row_images_bytes": float(f.row_images),
           "footprint_bytes": float(f.footprint)}
    if f.estimate is not None:
        out["model_peak_bytes"] = float(f.estimate)
    if row is not None:
        out.update(families=float(len(row.families)), device_packages=float(sum(n for _, n in row.families)))
    return out


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "n/a"


def print_figures(f: Figures) -> None:
    m = f.measured
    peak, final = f.peak, f.row_images
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
    if f.estimate is not None:
        lines.append(f"model / measured peak:            {_ratio(f.estimate, peak)} ({size(f.estimate)} / "
                     f"{size(peak)}: builder.publish.sizes.peak_of fed this row's parts)   target within 20%")
    print("\n".join(lines))
