"""The OCI layout a bake exports into: finding an image by name, and the `docker load` archive of one image."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

import docker
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
    assert ocilayout.load(engine, found, refs) == ocilayout.Loaded(found.digest, 0)  # type: ignore[arg-type]
    assert engine.loaded == 0
    assert engine.tagged == [(found.digest, "127.0.0.1:5000/ns/pytorch", "t"),
                             (found.digest, "127.0.0.1:5000/ns/pytorch", "t-0123456789ab"),
                             (found.digest, "127.0.0.1:5000/ns/untagged", "latest")]


def test_the_archive_leaves_out_held_blobs_but_never_the_manifest(tmp_path: Path) -> None:
    image(tmp_path, "x/mine:1", b"shared torch layer")
    found = ocilayout.find(tmp_path, "x/mine:1")
    held = frozenset([found.digest, found.layers[0].digest])
    data = b"".join(ocilayout.load_tar(found, ["x/mine:1"], held))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = set(tar.getnames())
    assert f"blobs/sha256/{found.digest[7:]}" in names and f"blobs/sha256/{found.config.digest[7:]}" in names
    assert f"blobs/sha256/{found.layers[0].digest[7:]}" not in names


def test_held_blobs_are_those_of_the_layouts_images_the_engine_lists(tmp_path: Path) -> None:
    a = image(tmp_path, "x/a:1", b"torch")
    image(tmp_path, "x/b:1", b"device")
    listed = [{"Id": a}, {"Id": "sha256:" + "0" * 64}]  # a base pulled before: not the layout's
    engine = type("E", (), {"api": type("A", (), {"images": lambda self, all=False: listed})()})()
    held = ocilayout.held_blobs(engine, tmp_path)  # type: ignore[arg-type]
    found = ocilayout.by_digest(tmp_path, a)
    assert held == {found.config.digest, found.layers[0].digest}


def test_held_blobs_include_those_of_images_loaded_from_an_earlier_layout(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """publish --by-family bakes each GPU family into a layout of its own: the engine still holds the previous
    family's images (and the torch layer they share), whose manifests the new layout lacks."""
    earlier = tmp_path / "earlier"
    a = image(earlier, "x/a:1", b"torch")
    found = ocilayout.by_digest(earlier, a)
    monkeypatch.setitem(ocilayout.LOADED, a, frozenset([found.config.digest, found.layers[0].digest]))
    image(tmp_path / "now", "x/b:1", b"device")
    engine = type("E", (), {"api": type("A", (), {"images": lambda self, all=False: [{"Id": a}]})()})()
    assert ocilayout.held_blobs(engine, tmp_path / "now") == {found.config.digest, found.layers[0].digest}  # type: ignore[arg-type]


def _layer(files: dict[str, bytes]) -> tuple[bytes, str]:
    """A gzip layer of files and its diff ID (the digest of the uncompressed tar)."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), mtime=0), "sha256:" + hashlib.sha256(raw.getvalue()).hexdigest()


def real_image(layout: Path, name: str, layers: list[tuple[bytes, str]]) -> None:
    """An image the engine can unpack: gzip tar layers, a config naming their diff IDs."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Cmd": ["/none"]},
                         "rootfs": {"type": "layers", "diff_ids": [d for _, d in layers]}}).encode()
    body = json.dumps({"schemaVersion": 2, "mediaType": ocilayout.MANIFEST_TYPES[0],
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                  "digest": blob(layout, config), "size": len(config)},
                       "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                   "digest": blob(layout, data), "size": len(data)} for data, _ in layers]}).encode()
    digest = blob(layout, body)
    index = layout / ocilayout.INDEX
    entries = json.loads(index.read_text())["manifests"] if index.exists() else []
    entries.append({"mediaType": ocilayout.MANIFEST_TYPES[0], "digest": digest, "size": len(body),
                    "annotations": {ocilayout.NAME_ANNOTATION: ocilayout.full_name(name)}})
    index.write_text(json.dumps({"schemaVersion": 2, "manifests": entries}))


@pytest.mark.docker
def test_the_second_image_of_a_pair_streams_only_its_own_new_bytes(tmp_path: Path,
                                                                   docker_client: docker.DockerClient) -> None:
    """Two images sharing a 4 MB incompressible layer (torch's part): the second one's archive is its own layer,
    config and manifest, and the engine holds it whole (the shared file reads back from its container)."""
    shared = _layer({"shared.bin": os.urandom(4 << 20)})
    own = [_layer({f"{n}.txt": os.urandom(4096)}) for n in ("a", "b")]
    stamp = os.urandom(6).hex()
    names = [f"rocm-image-factory/ocilayout-pair:{n}-{stamp}" for n in ("a", "b")]
    for name, mine in zip(names, own, strict=True):
        real_image(tmp_path, name, [shared, mine])
    try:
        first = ocilayout.load(docker_client, ocilayout.find(tmp_path, names[0]), [names[0]])
        second_image = ocilayout.find(tmp_path, names[1])
        second = ocilayout.load(docker_client, second_image, [names[1]])
        new = len(second_image.manifest) + second_image.config.size + second_image.layers[1].size
        assert first.streamed > len(shared[0]) > second.streamed
        assert second.streamed <= new + 16 * 1024  # tar headers and the archive's padding
        container = docker_client.containers.create(names[1], network_mode="none")
        try:
            stream, _ = container.get_archive("/shared.bin")
            assert sum(len(chunk) for chunk in stream) >= 4 << 20
        finally:
            container.remove(force=True)
    finally:
        for name in names:
            with contextlib.suppress(docker.errors.DockerException):
                docker_client.images.remove(name, force=True)


@pytest.mark.docker
@pytest.mark.parametrize("gone", ["config", "layer"])
def test_a_blob_said_held_but_gone_is_sent_again(gone: str, tmp_path: Path, docker_client: docker.DockerClient,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """held_blobs wrong (the engine dropped a blob meanwhile; dockerd loads an archive short of a blob it lacks
    without an error, as an image it cannot read or unpack): the image is loaded again with every blob."""
    stamp = os.urandom(6).hex()
    name = f"rocm-image-factory/ocilayout-gone:{stamp}"
    real_image(tmp_path, name, [_layer({"x.bin": os.urandom(1 << 20)})])
    found = ocilayout.find(tmp_path, name)
    said = found.config.digest if gone == "config" else found.layers[0].digest
    monkeypatch.setattr(ocilayout, "held_blobs", lambda client, layout: frozenset([said]))
    try:
        loaded = ocilayout.load(docker_client, found, [name])
        assert loaded.streamed > found.layers[0].size + found.config.size
        assert docker_client.api.inspect_image(name)["RootFS"]["Layers"]
    finally:
        with contextlib.suppress(docker.errors.DockerException):
            docker_client.images.remove(name, force=True)
