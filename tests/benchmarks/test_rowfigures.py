"""The row benchmark's figures: the row's images as one containerd store holds them, each blob once and each layer
unpacked once per chain it sits on (a devel toolchain layer, the same bytes in every family, on each); the layers
of released images; and the per-wave model fed the row's parts at the payload's ratio."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from benchmarks.support import rowfigures
from benchmarks.support.localregistry import LocalRegistry
from builder.publish import sizes


def _store(registry: LocalRegistry, data: bytes) -> dict[str, Any]:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = registry.blob_path(digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": digest, "size": len(data)}


def _layer(registry: LocalRegistry, name: str, payload: int) -> tuple[dict[str, Any], str, int]:
    """A gzip layer of one file: its descriptor, diff ID and unpacked (tar) bytes."""
    tar = io.BytesIO()
    with tarfile.open(fileobj=tar, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = payload
        archive.addfile(info, io.BytesIO(b"x" * payload))
    raw = tar.getvalue()
    descriptor = _store(registry, gzip.compress(raw, mtime=0))
    descriptor["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"
    return descriptor, "sha256:" + hashlib.sha256(raw).hexdigest(), len(raw)


def test_a_layer_on_two_chains_is_unpacked_twice_and_stored_once(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    registry = LocalRegistry(tmp_path)
    base, fam_a, fam_b, tools = (_layer(registry, n, s) for n, s in
                                 (("base", 3000), ("a", 5000), ("b", 7000), ("tools", 11000)))
    manifests: dict[str, dict[str, Any]] = {}
    for name, layers in {"a-devel": [base, fam_a, tools], "b-devel": [base, fam_b, tools],
                         "a-runtime": [base, fam_a]}.items():
        config = _store(registry, json.dumps({"rootfs": {"diff_ids": [d for _, d, _ in layers]}}).encode())
        manifests[name] = {"config": config, "layers": [descriptor for descriptor, _, _ in layers]}
    monkeypatch.setattr(rowfigures, "_get", lambda reg, path, accept: manifests[path.rsplit("/", 1)[-1]])
    read = [rowfigures.manifest_of(registry, {"repository": "r", "digest": name}) for name in manifests]
    blobs = sum(m["config"]["size"] for m in manifests.values()) + sum(d["size"] for d, _, _ in (base, fam_a, fam_b,
                                                                                                  tools))
    unpacked = base[2] + fam_a[2] + fam_b[2] + 2 * tools[2]  # the toolchain on a's chain and on b's
    assert rowfigures.footprint(registry, read) == blobs + unpacked


def test_the_model_is_fed_the_rows_parts_at_the_payloads_ratio() -> None:
    """Each image: the base, torch with the ROCm libraries, its family's device packages (one per target) and, for
    devel, the toolchain; the wheels' blobs their installed bytes / the ratio; the peak is the plan's for them."""
    row = rowfigures.Row((("gfx1150", 1), ("gfx103X-all", 7)), 4 * 10**9, 600 * 10**6, 2.7)
    images = row.images()
    assert [i.tag for i in images] == ["gfx1150-runtime", "gfx103X-all-runtime", "gfx1150-devel", "gfx103X-all-devel"]
    devel = images[3]
    assert devel.parts == {("base", "g"): rowfigures.BASE, ("torch", "g"): sizes.Layer(int(4e9 / 2.7), 4 * 10**9),
                           ("device", "g", "gfx103X-all"): sizes.Layer(int(4.2e9 / 2.7), 4_200_000_000),
                           ("devel", "g", "gfx103X-all"): rowfigures.DEVEL}
    assert (devel.family, devel.runtime, images[1].runtime) == ("gfx103X-all", False, True)
    assert ("devel", "g", "gfx103X-all") not in images[1].parts
    assert row.peak() == sizes.peak_of(images)
    incompressible = rowfigures.Row(row.families, row.shared, row.device, 1.0)
    assert incompressible.images()[3].parts[("torch", "g")] == sizes.Layer(4 * 10**9, 4 * 10**9)
    assert incompressible.peak() > row.peak()


def test_a_released_images_layers_count_blob_and_unpacked_once_and_a_held_images_not_at_all(tmp_path: Path) -> None:
    registry = LocalRegistry(tmp_path)
    base, own, shared = (_layer(registry, n, s) for n, s in (("base", 3000), ("own", 5000), ("shared", 7000)))
    config = _store(registry, b"{}")
    released = {"config": config, "layers": [base[0], own[0], shared[0]]}
    held_config = _store(registry, b'{"held": 1}')
    held = {"config": held_config, "layers": [base[0], shared[0]]}
    found = rowfigures.released(registry, {"gone": released, "kept": held}, frozenset({"kept"}))
    assert found == 2 * config["size"] + own[0]["size"] + own[2]
