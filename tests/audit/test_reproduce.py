"""Byte-reproducible images: what is validated is what is pushed, a cold rebuild gives the published manifest
digest, and `builder reproduce` says so, or names the layer and files of an image tampered with in the registry.

The engine case (publish from a lock, the checkout's lock moves on, a cold rebuild from the lock recorded with the
image gives its manifest, a tampered layer is named) is tests/e2e/test_os_pinned_example.py's: one published image
and one cold rebuild serve both, OS packages pinned to a snapshot as well as wheels. Here: the comparison itself, the
recorded lock as the registry answers it (lies included), and the command's refusals."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Callable
from typing import Any

import pytest

from builder.audit import reproduce
from builder.core import tags
from builder.registry.client import RegistryClient
from builder.render import lockfile, lockrecord
from testkit.layers import blob
from testkit.scripted_registry import Scripted, Seen
from tests.fakes.checkout import builder_cli


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
    base = blob({"etc/os-release": b"debian"})
    good = blob({"opt/venv/a.py": b"a", "opt/venv/b.py": b"b"})
    bad = blob({"opt/venv/a.py": b"A", "opt/venv/c.py": b"c"}, mtime=5)
    top_a, top_b = blob({"x": b"1"}), blob({"x": b"2"})  # a later layer differs too: the first one is named
    published, rebuilt = manifest([base, bad, top_a]), manifest([base, good, top_b])
    verdict = reproduce.compare("r", published, rebuilt, blobs(base, bad, top_a), blobs(base, good, top_b))
    assert not verdict.identical and verdict.layer == 1
    assert verdict.files == ["~ opt/venv/a.py (mtime, sha256)", "+ opt/venv/b.py (only in the rebuild)",
                             "- opt/venv/c.py (only in the published layer)"]
    assert "layer 1 of 3 differs" in "\n".join(verdict.lines())


def test_same_layers_another_config_names_the_config_keys() -> None:
    base = blob({"a": b"a"})
    published = manifest([base], b'{"config": {"Labels": {"x": "1"}}, "created": "1970"}')
    rebuilt = manifest([base], b'{"config": {"Labels": {"x": "2"}}, "created": "1970"}')
    verdict = reproduce.compare("r", published, rebuilt,
                                blobs(base, b'{"config": {"Labels": {"x": "1"}}, "created": "1970"}'),
                                blobs(base, b'{"config": {"Labels": {"x": "2"}}, "created": "1970"}'))
    assert (verdict.layer, verdict.files) == (None, ["~ config"])
    assert reproduce.compare("r", published, published, blobs(), blobs()).identical


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
    assert "no lock is recorded with the image: rebuilding from this checkout as it is" in proc.stdout
    message = " ".join(proc.stderr.split())
    assert "--cell" not in message and "no cell has tag" not in message
    assert "matrix.yaml (the default) has no such cell; it is a cell of examples/local.yaml: pass --matrix " \
           "examples/local.yaml" in message


IMAGE = "sha256:" + "1" * 64


def lock_registry(server: Callable[..., Scripted], recorded: lockrecord.Recorded, subject: str = IMAGE,
                  blob_of: Callable[[bytes], bytes] = lambda b: b, size: int | None = None,
                  layers: int = 1) -> Scripted:
    """A registry whose image IMAGE has one lock record artifact (as promote.Target.attach_lock writes it), each
    part of it open to a test's lie: its subject, its blob's bytes, its declared size, its number of blobs."""
    body = recorded.body
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    artifact = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": lockrecord.MEDIA_TYPE,
        "config": {"mediaType": "application/vnd.oci.empty.v1+json", "digest": "sha256:" + "4" * 64, "size": 2},
        "layers": [{"mediaType": lockrecord.MEDIA_TYPE, "digest": digest, "size": size or len(body)}] * layers,
        "subject": {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": subject, "size": 9},
    }).encode()
    artifact_digest = "sha256:" + hashlib.sha256(artifact).hexdigest()
    index = json.dumps({"schemaVersion": 2, "manifests": [{
        "mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": artifact_digest,
        "size": len(artifact), "artifactType": lockrecord.MEDIA_TYPE}]}).encode()

    def answer(seen: Seen) -> tuple[int, dict[str, str], bytes]:
        if seen.path.startswith(f"/v2/ns/pytorch/referrers/{IMAGE}"):
            return 200, {"Content-Type": "application/vnd.oci.image.index.v1+json"}, index
        if seen.path == f"/v2/ns/pytorch/manifests/{artifact_digest}":
            return 200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, artifact
        if seen.path == f"/v2/ns/pytorch/blobs/{digest}":
            return 200, {}, blob_of(body)
        return 404, {}, b""
    return server(answer)


def recorded_files() -> dict[str, str]:
    return {"base.txt": lockfile.base_text(lockfile.Step("base.txt", ("debian:12",)), "debian:12@sha256:" + "b" * 64),
            "torch.txt": lockfile.pip_text(lockfile.Step("torch.txt", ("torch==2.13.0",), "3.11"),
                                           [lockfile.Pin("torch", "2.13.0", "c" * 64)])}


def test_the_lock_recorded_with_an_image_is_found_and_read(server: Callable[..., Scripted]) -> None:
    recorded = lockrecord.Recorded(recorded_files())
    reg = lock_registry(server, recorded)
    found = reproduce.recorded_lock("ref", "ns/pytorch", IMAGE, RegistryClient(reg.address))
    assert found is not None and found[1] == recorded and found[0].startswith("sha256:")
    assert found[1].summary() == "OS packages unpinned, 1 wheels, 0 OS packages"
    none = server(lambda seen: (404, {}, b""))
    assert reproduce.recorded_lock("ref", "ns/pytorch", IMAGE, RegistryClient(none.address)) is None


@pytest.mark.parametrize(("lie", "said"), [
    ({"subject": "sha256:" + "2" * 64}, "is not one lock blob referring to"),  # another image's record
    ({"layers": 2}, "is not one lock blob referring to"),
    ({"size": lockrecord.MAX_BYTES + 1}, "over the"),
    ({"blob_of": lambda b: b.replace(b"torch", b"t0rch")}, "cannot be read"),  # bytes that are not the digest
])
def test_a_lock_record_the_registry_lies_about_is_refused(server: Callable[..., Scripted], lie: dict[str, Any],
                                                         said: str) -> None:
    reg = lock_registry(server, lockrecord.Recorded(recorded_files()), **lie)
    with pytest.raises(reproduce.ReproduceError, match=said):
        reproduce.recorded_lock("ref", "ns/pytorch", IMAGE, RegistryClient(reg.address))


def test_a_lock_record_out_of_grammar_is_refused(server: Callable[..., Scripted]) -> None:
    files = recorded_files()
    files["torch.txt"] += "-r /etc/passwd\n"
    reg = lock_registry(server, lockrecord.Recorded(files))
    with pytest.raises(reproduce.ReproduceError, match=r"torch\.txt:\d+: lock: .*refused"):
        reproduce.recorded_lock("ref", "ns/pytorch", IMAGE, RegistryClient(reg.address))
