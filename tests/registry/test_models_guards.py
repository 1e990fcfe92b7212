"""The limits of builder.registry.models (and the SBOM's, builder.validate.cyclonedx) on both sides, with the
documented limits written out here, never read from the constants under test (issue 53, "Registry answers"): a
limit raised 10x makes the over-limit document pass, and these tests fail.

Documented in builder/registry/models.py's docstring and constants: 500 layers, 2,000 history steps, 1,000 labels
(and annotations), 1,000 descriptors in an index or a referrers answer, 256 KiB of text in a label or history step,
1,024 characters in a name (media type, digest, label key); builder/validate/cyclonedx.py: 50,000 components."""

from __future__ import annotations

import json
from typing import Any

import pytest

from builder.audit import diff
from builder.registry import models
from builder.registry.errors import RegistryError
from builder.validate import sbom
from testkit.scripted_registry import Reply, Seen
from tests.registry.test_models import Start, blob, sha

LAYER = {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": "sha256:" + "a" * 64, "size": 1}
AMD64 = {**LAYER, "mediaType": "application/vnd.oci.image.manifest.v1+json",
         "platform": {"os": "linux", "architecture": "amd64"}}


def manifest(layers: int) -> bytes:
    return json.dumps({"schemaVersion": 2, "config": LAYER, "layers": [LAYER] * layers}).encode()


def config(history: int = 0, labels: dict[str, str] | None = None) -> bytes:
    return json.dumps({"os": "linux", "config": {"Labels": labels or {}},
                       "history": [{"created_by": "RUN true"}] * history}).encode()


def refused(model: type[models.Model], body: bytes, where: str) -> str:
    with pytest.raises(models.ShapeError) as info:
        models.parse(model, body, "r.example/ns/img:t")
    message = str(info.value)
    assert message.startswith(f"r.example/ns/img:t: {where}"), message
    return message


def test_500_layers_are_read_and_501_refused() -> None:
    assert len(models.parse(models.ManifestDoc, manifest(500), "m").layers) == 500
    assert "at most 500 items" in refused(models.ManifestDoc, manifest(501), "layers")


def test_2000_history_steps_are_read_and_2001_refused() -> None:
    assert len(models.parse(models.ImageConfig, config(history=2000), "c").history) == 2000
    assert "at most 2000 items" in refused(models.ImageConfig, config(history=2001), "history")


def test_1000_labels_are_read_and_1001_refused() -> None:
    labels = {f"org.example.l{i}": "v" for i in range(1001)}
    kept = dict(list(labels.items())[:1000])
    assert len(models.parse(models.ImageConfig, config(labels=kept), "c").labels) == 1000
    assert "at most 1000 items" in refused(models.ImageConfig, config(labels=labels), "config.Labels")
    annotated = {**LAYER, "annotations": labels}
    assert "at most 1000 items" in refused(models.ManifestDoc, json.dumps(
        {"schemaVersion": 2, "config": annotated}).encode(), "config.annotations")


@pytest.mark.parametrize(("model", "where", "extra"), [
    (models.ManifestDoc, "manifests", {"schemaVersion": 2}),
    (models.Referrers, "manifests", {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json"}),
])
def test_1000_descriptors_are_read_and_1001_refused(model: type[models.Model], where: str,
                                                     extra: dict[str, Any]) -> None:
    assert len(models.parse(model, json.dumps({**extra, "manifests": [AMD64] * 1000}).encode(),
                            "i").manifests or []) == 1000  # type: ignore[attr-defined]
    assert "at most 1000 items" in refused(model, json.dumps({**extra, "manifests": [AMD64] * 1001}).encode(), where)


def test_a_label_of_256_kib_is_read_and_one_character_more_refused() -> None:
    text = "x" * 262_144
    assert models.parse(models.ImageConfig, config(labels={"k": text}), "c").labels["k"] == text
    assert "at most 262144 characters" in refused(models.ImageConfig, config(labels={"k": text + "x"}),
                                                  "config.Labels.k")
    step = json.dumps({"history": [{"created_by": text + "x"}]}).encode()
    assert "at most 262144 characters" in refused(models.ImageConfig, step, "history.0.created_by")


def test_a_name_of_1024_characters_is_read_and_1025_refused() -> None:
    name = "n" * 1024
    assert models.parse(models.ImageConfig, json.dumps({"os": name}).encode(), "c").os == name
    assert "at most 1024 characters" in refused(models.ImageConfig, json.dumps({"os": name + "n"}).encode(), "os")
    key = json.dumps({"config": {"Labels": {"k" * 1025: "v"}}}).encode()
    assert "at most 1024 characters" in refused(models.ImageConfig, key, "config.Labels.")


def component(i: int) -> dict[str, str]:
    return {"type": "library", "name": f"p{i}", "version": "1", "purl": f"pkg:pypi/p{i}@1"}


def test_an_sbom_of_50000_components_is_read_and_50001_refused() -> None:
    doc = {"bomFormat": "CycloneDX", "specVersion": "1.5", "components": [component(i) for i in range(50_000)]}
    assert len(sbom.read(json.dumps(doc).encode()).packages) == 50_000
    doc["components"].append(component(50_000))  # type: ignore[attr-defined]
    with pytest.raises(sbom.SbomError, match=r"^the SBOM: components: .*at most 50000 items"):
        sbom.read(json.dumps(doc).encode())


# -- the SBOM blob `builder diff` reads: at most 8 MiB (8,388,608 bytes), written out ---------------------------

def sbom_registry(server: Start, size: int) -> str:
    """A loopback registry serving one image whose referrers list one SBOM artifact, its SBOM `size` bytes of JSON
    (a CycloneDX document padded with spaces, as a pretty-printer pads it)."""
    head = json.dumps({"bomFormat": "CycloneDX", "specVersion": "1.6", "components": []}).encode()
    body = head[:-1] + b" " * (size - len(head)) + b"}"
    assert len(body) == size
    image = json.dumps({"schemaVersion": 2, "config": blob(), "layers": []}).encode()
    artifact = json.dumps({"schemaVersion": 2, "artifactType": sbom.MEDIA_TYPE, "config": blob(),
                           "layers": [{"mediaType": sbom.MEDIA_TYPE, "digest": sha(body), "size": size}]}).encode()
    index = json.dumps({"manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                       "digest": sha(artifact), "size": len(artifact),
                                       "artifactType": sbom.MEDIA_TYPE}]}).encode()
    kind = {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}

    def answer(seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        if "/referrers/" in path:
            return 200, {"Content-Type": "application/vnd.oci.image.index.v1+json"}, index
        if "/manifests/" in path:
            return 200, kind, artifact if path.endswith(sha(artifact)) else image
        return (200, {}, body) if path.endswith(sha(body)) else (404, {}, b"")
    return f"{server(answer).address}/ns/r:tag"


def test_an_sbom_of_exactly_8_mib_is_read_and_one_byte_more_is_refused(server: Start,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    found = diff.fetch(diff.parse_ref(sbom_registry(server, 8_388_608), "A"))
    assert len(found.packages) == 0, "the whole 8 MiB was read and parsed: a CycloneDX document of no component"
    with pytest.raises(RegistryError, match="more than the 8388608"):
        diff.fetch(diff.parse_ref(sbom_registry(server, 8_388_609), "A"))
