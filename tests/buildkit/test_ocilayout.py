"""The OCI layout a bake exports into: finding an image by name, and the `docker load` archive of one image."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path

import pytest

from builder.buildkit import ocilayout


def blob(layout: Path, data: bytes) -> str:
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest[7:]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return digest


def image(layout: Path, name: str, layer: bytes) -> str:
    config, top = blob(layout, json.dumps({"config": {"Labels": {"n": name}}}).encode()), blob(layout, layer)
    manifest = json.dumps({"schemaVersion": 2, "mediaType": ocilayout.MANIFEST_TYPES[0],
                           "config": {"digest": config, "size": 14, "mediaType": "c"},
                           "layers": [{"digest": top, "size": len(layer), "mediaType": "l"}]}).encode()
    digest = blob(layout, manifest)
    index = layout / ocilayout.INDEX
    entries = json.loads(index.read_text())["manifests"] if index.exists() else []
    entries.append({"mediaType": ocilayout.MANIFEST_TYPES[0], "digest": digest, "size": len(manifest),
                    "annotations": {ocilayout.NAME_ANNOTATION: ocilayout.full_name(name)}})
    index.write_text(json.dumps({"schemaVersion": 2, "manifests": entries}))
    return digest


def test_images_of_one_layout_are_found_by_name_and_share_blobs(tmp_path: Path) -> None:
    a = image(tmp_path, "rocm-image-factory/pytorch:a-1", b"torch")
    b = image(tmp_path, "rocm-image-factory/pytorch:b-2", b"torch")
    found = ocilayout.find(tmp_path, "rocm-image-factory/pytorch:b-2")
    other = ocilayout.find(tmp_path, "rocm-image-factory/pytorch:a-1")
    assert found.digest == b != a == other.digest
    assert [x.digest for x in found.layers] == [x.digest for x in other.layers]  # one torch blob for both
    assert ocilayout.by_digest(tmp_path, a).digest == a
    with pytest.raises(ocilayout.LayoutError, match="no image named"):
        ocilayout.find(tmp_path, "rocm-image-factory/pytorch:c-3")
    with pytest.raises(ocilayout.LayoutError, match="no OCI layout"):
        ocilayout.find(tmp_path / "nowhere", "x:y")


def test_the_load_archive_holds_that_image_alone_named_as_asked(tmp_path: Path) -> None:
    image(tmp_path, "x/other:1", b"other")
    digest = image(tmp_path, "x/mine:1", b"mine")
    data = b"".join(ocilayout.load_tar(ocilayout.find(tmp_path, "x/mine:1"), ["x/mine:1", "x/mine:1-abc"]))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
        index = json.loads(tar.extractfile("index.json").read())  # type: ignore[union-attr]
    assert [m["annotations"][ocilayout.NAME_ANNOTATION] for m in index["manifests"]] == [
        "docker.io/x/mine:1", "docker.io/x/mine:1-abc"]
    assert {m["digest"] for m in index["manifests"]} == {digest}
    assert len([n for n in names if n.startswith("blobs/")]) == 3  # manifest, config, its one layer


def test_a_missing_blob_is_an_error_naming_the_image(tmp_path: Path) -> None:
    image(tmp_path, "x/mine:1", b"mine")
    found = ocilayout.find(tmp_path, "x/mine:1")
    found.blob_path(found.layers[0].digest).unlink()
    with pytest.raises(ocilayout.LayoutError, match=found.digest):
        b"".join(ocilayout.load_tar(found, ["x/mine:1"]))


def test_local_names_are_normalised_as_containerd_names_them() -> None:
    assert ocilayout.full_name("debian:12") == "docker.io/library/debian:12"
    assert ocilayout.full_name("rocm-image-factory/pytorch:t") == "docker.io/rocm-image-factory/pytorch:t"
    assert ocilayout.full_name("127.0.0.1:5000/ns/x:t") == "127.0.0.1:5000/ns/x:t"
    assert ocilayout.full_name("localhost/x:t") == "localhost/x:t"


class _Engine:
    """An engine that already holds one image: records what load() asks of it (pure logic, no engine)."""

    def __init__(self, holds: str) -> None:
        self.holds, self.tagged, self.loaded = holds, list[tuple[str, str, str]](), 0
        self.images, self.api = self, self

    def get(self, ref: str) -> object:
        if ref != self.holds:
            raise ocilayout.docker.errors.ImageNotFound(ref)
        return type("Found", (), {"id": self.holds})()

    def tag(self, image_id: str, repository: str, tag: str) -> bool:
        self.tagged.append((image_id, repository, tag))
        return True

    def load_image(self, data: object) -> list[object]:
        self.loaded += 1
        return []


def test_an_engine_holding_the_manifest_gets_names_only_and_no_blob_is_read(tmp_path: Path) -> None:
    image(tmp_path, "x/mine:1", b"mine")
    found = ocilayout.find(tmp_path, "x/mine:1")
    found.blob_path(found.layers[0].digest).unlink()  # a load would fail: nothing may be read
    engine = _Engine(found.digest)
    refs = ["127.0.0.1:5000/ns/pytorch:t", "127.0.0.1:5000/ns/pytorch:t-0123456789ab", "127.0.0.1:5000/ns/untagged"]
    assert ocilayout.load(engine, found, refs) == found.digest  # type: ignore[arg-type]
    assert engine.loaded == 0
    assert engine.tagged == [(found.digest, "127.0.0.1:5000/ns/pytorch", "t"),
                             (found.digest, "127.0.0.1:5000/ns/pytorch", "t-0123456789ab"),
                             (found.digest, "127.0.0.1:5000/ns/untagged", "latest")]
