"""Byte-reproducible images: what is validated is what is pushed, a cold rebuild gives the published manifest
digest, and `builder reproduce` says so, or names the layer and files of an image tampered with in the registry."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import tarfile
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.audit import layers, reproduce
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Export
from builder.core import tags
from builder.pipeline import jobs, lifecycle
from builder.pipeline.lifecycle import Events
from builder.registry.client import RegistryClient
from builder.render.sources import WheelSource
from tests.fakes.checkout import builder_cli
from tests.fakes.matrices import BARE_TORCH, cpu_matrix, write_matrix
from tests.fakes.scripted_registry import Scripted, Seen


def matrix_of(image: str) -> str:
    return cpu_matrix(BARE_TORCH, image=image) + "  flavor: [runtime]\n"


def layer(files: dict[str, bytes], mtime: int = 0) -> bytes:
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mtime = len(data), mtime
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def manifest(layers: list[bytes], config: bytes = b"{}") -> tuple[str, bytes]:
    def desc(blob: bytes) -> dict[str, object]:
        return {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "size": len(blob),
                "digest": "sha256:" + hashlib.sha256(blob).hexdigest()}
    body = json.dumps({"config": {**desc(config), "mediaType": "application/vnd.oci.image.config.v1+json"},
                       "layers": [desc(b) for b in layers]}).encode()
    return "sha256:" + hashlib.sha256(body).hexdigest(), body


def blobs(*items: bytes) -> reproduce.Blobs:
    by_digest = {"sha256:" + hashlib.sha256(b).hexdigest(): b for b in items}
    return lambda digest: io.BytesIO(by_digest[digest])


def test_the_first_differing_layer_and_its_files_are_named() -> None:
    base = layer({"etc/os-release": b"debian"})
    good = layer({"opt/venv/a.py": b"a", "opt/venv/b.py": b"b"})
    bad = layer({"opt/venv/a.py": b"A", "opt/venv/c.py": b"c"}, mtime=5)
    top_a, top_b = layer({"x": b"1"}), layer({"x": b"2"})  # a later layer differs too: the first one is named
    published, rebuilt = manifest([base, bad, top_a]), manifest([base, good, top_b])
    verdict = reproduce.compare("r", published, rebuilt, blobs(base, bad, top_a), blobs(base, good, top_b))
    assert not verdict.identical and verdict.layer == 1
    assert verdict.files == ["~ opt/venv/a.py (mtime, sha256)", "+ opt/venv/b.py (only in the rebuild)",
                             "- opt/venv/c.py (only in the published layer)"]
    assert "layer 1 of 3 differs" in "\n".join(verdict.lines())


def test_same_layers_another_config_names_the_config_keys() -> None:
    base = layer({"a": b"a"})
    published = manifest([base], b'{"config": {"Labels": {"x": "1"}}, "created": "1970"}')
    rebuilt = manifest([base], b'{"config": {"Labels": {"x": "2"}}, "created": "1970"}')
    verdict = reproduce.compare("r", published, rebuilt,
                                blobs(base, b'{"config": {"Labels": {"x": "1"}}, "created": "1970"}'),
                                blobs(base, b'{"config": {"Labels": {"x": "2"}}, "created": "1970"}'))
    assert (verdict.layer, verdict.files) == (None, ["~ config"])
    assert reproduce.compare("r", published, published, blobs(), blobs()).identical


@pytest.mark.docker
def test_a_cold_rebuild_is_the_published_image_and_a_tampered_layer_is_found(base_image: str, wheelhouse: Path,
                                                                             namespace: str, tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, matrix_of(f"repro{uuid.uuid4().hex[:8]}"))
    record = tmp_path / "record.json"
    built = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--push",
                        "--registry", namespace, "--report", str(record), "--quiet")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [row] = json.loads(record.read_text())["images"]
    assert row["state"] == "published"
    assert row["digest"] == row["image_id"]  # validated (the engine's image) is what was pushed, by digest
    ref = f"{namespace}/{row['repository']}:{row['immutable_tag']}"
    args = ["--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--progress", "plain"]

    same = builder_cli("reproduce", ref, *args)
    assert same.returncode == 0, same.stdout[-3000:] + same.stderr[-3000:]
    assert f"identical: the cold rebuild's manifest is {row['digest']}" in same.stdout
    assert "no lock is recorded with the image: rebuilding from this checkout as it is" in same.stdout  # unlocked

    # Tamper with the registry: the cell file's layer gets other bytes, under the same tag.
    registry, repository = namespace.split("/", 1)[0], f"{namespace.split('/', 1)[1]}/{row['repository']}"
    api = RegistryClient(registry)
    published = api.manifest(repository, row["immutable_tag"])
    assert published is not None
    body = json.loads(published.body)
    cell = next(i for i, d in reversed(list(enumerate(body["layers"])))  # above it: WORKDIR's empty layer
                if "opt/rif/cell.json" in layers.entries(io.BytesIO(api.blob(repository, d["digest"]))))
    evil = layer({"opt/rif/cell.json": b'{"evil": true}'})
    body["layers"][cell] = {**body["layers"][cell], "digest": api.push_blob(repository, evil), "size": len(evil)}
    api.put_manifest(repository, row["immutable_tag"], json.dumps(body).encode(), published.media_type)

    # The tampered image is compared with a rebuild from BuildKit's cache (the image is byte-reproducible: the
    # same manifest as the cold rebuild above proved), so the suite pays for one cold rebuild, not two.
    source = WheelSource(wheelhouse.resolve())
    [job] = jobs.matrix_jobs(matrix, [row["tag"]], None, source)
    kit = BuildKit(None, os.environ["RIF_BUILD_NETWORK"])  # the CLI runs' network above: the same cache keys

    def warm(published: reproduce.Published, layout: Path) -> str:
        assert (published.tag, published.content_hash, published.lock) == (job.tag, job.content_hash, None)
        export = Export(layout, published.compression, load=False)
        built = lifecycle._bake_into([job], source, Events(), export, kit)
        assert built[job.tag].ok and built[job.tag].manifest_digest, built[job.tag].error
        return str(built[job.tag].manifest_digest)

    verdict = reproduce.check(ref, repository, row["immutable_tag"], api, warm)
    said = "\n".join(verdict.lines())
    assert not verdict.identical and verdict.layer == cell, said
    assert f"layer {cell} of {len(body['layers'])} differs" in said
    assert "~ opt/rif/cell.json (" in said


def test_reproduce_refuses_a_bad_reference() -> None:
    proc = builder_cli("reproduce", "not a ref")
    assert proc.returncode == 2 and "REF" in proc.stderr


EXAMPLE_RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"


def test_reproduce_without_matrix_names_the_example_matrix_not_a_cell_option(
        server: Callable[..., Scripted]) -> None:
    config = json.dumps({"config": {"Labels": {tags.TAG_LABEL: EXAMPLE_RUNTIME,
                                                tags.HASH_LABEL: "sha256:" + "1" * 64}}}).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    body = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"digest": config_digest, "size": len(config)}, "layers": []}).encode()

    def answer(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if "/manifests/" in seen.path:
            return 200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, body
        if seen.path.endswith(config_digest):
            return 200, {}, config
        return 404, {}, b""

    reg = server(answer)
    proc = builder_cli("reproduce", f"{reg.address}/ns/pytorch:{EXAMPLE_RUNTIME}")
    assert proc.returncode == 2, proc.stderr
    message = " ".join(proc.stderr.split())
    assert "--cell" not in message and "no cell has tag" not in message
    assert "matrix.yaml (the default) has no such cell; it is a cell of examples/local.yaml: pass --matrix " \
           "examples/local.yaml" in message
