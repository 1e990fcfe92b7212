"""Each limit of the registry's models on its own: a document at the limit is read, one past it is a ShapeError.
A test per limit, so removing any one of them fails its own test (the 50,000-layer catalog test passes with
either the layer or the history limit gone). The tag-list and SBOM read caps are held through a scripted
registry: a body one byte past the cap is refused before it is parsed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from builder.audit import diff
from builder.registry import models
from builder.registry.client import RegistryClient, RegistryError
from builder.validate import sbom
from tests.fakes.scripted_registry import FAST, Reply, Scripted, Seen

Start = Callable[[Callable[[Seen], Reply]], Scripted]
DIGEST = "sha256:" + "a" * 64


def descriptor(**extra: Any) -> dict[str, Any]:
    return {"mediaType": "application/octet-stream", "digest": DIGEST, "size": 1, **extra}


def labels(n: int) -> dict[str, str]:
    return {f"k{i}": "v" for i in range(n)}


# (what, model, a document of n items / characters, the limit)
LIMITS: list[tuple[str, type[models.Model], Callable[[int], Any], int]] = [
    ("layers", models.ManifestDoc, lambda n: {"layers": [descriptor()] * n}, models.MAX_LAYERS),
    ("history", models.ImageConfig, lambda n: {"history": [{"created_by": "x"}] * n}, models.MAX_HISTORY),
    ("labels", models.ImageConfig, lambda n: {"config": {"Labels": labels(n)}}, models.MAX_LABELS),
    ("annotations", models.ManifestDoc, lambda n: {"config": descriptor(annotations=labels(n))}, models.MAX_LABELS),
    ("index entries", models.ManifestDoc, lambda n: {"manifests": [descriptor()] * n}, models.MAX_DESCRIPTORS),
    ("referrers", models.Referrers, lambda n: {"manifests": [descriptor()] * n}, models.MAX_DESCRIPTORS),
    ("tags listed", models.TagList, lambda n: {"tags": ["t"] * n}, models.MAX_TAGS_LISTED),
    ("label text", models.ImageConfig, lambda n: {"config": {"Labels": {"k": "x" * n}}}, models.MAX_TEXT_CHARS),
    ("history text", models.ImageConfig, lambda n: {"history": [{"created_by": "x" * n}]}, models.MAX_TEXT_CHARS),
    ("label key", models.ImageConfig, lambda n: {"config": {"Labels": {"k" * n: "v"}}}, models.MAX_NAME_CHARS),
    ("digest", models.ManifestDoc, lambda n: {"config": {"digest": "d" * n}}, models.MAX_NAME_CHARS),
    ("size", models.ManifestDoc, lambda n: {"config": descriptor(size=n)}, models.MAX_SIZE),
]


@pytest.mark.parametrize(("what", "model", "doc", "limit"), LIMITS, ids=[case[0] for case in LIMITS])
def test_each_limit_admits_its_limit_and_refuses_one_more(what: str, model: type[models.Model],
                                                          doc: Callable[[int], Any], limit: int) -> None:
    models.parse(model, json.dumps(doc(limit)), what)
    with pytest.raises(models.ShapeError):
        models.parse(model, json.dumps(doc(limit + 1)), what)


STRICT = [(models.ManifestDoc, {"config": descriptor(size="1")}), (models.ManifestDoc, {"schemaVersion": "2"}),
          (models.ManifestDoc, {"config": descriptor(size=1.0)}),
          (models.ManifestDoc, {"config": descriptor(size=True)}),
          (models.ImageConfig, {"history": [{"empty_layer": "true"}]}),
          (models.ImageConfig, {"history": [{"empty_layer": 1}]}),
          (models.ImageConfig, {"config": {"Labels": {"k": 5}}}), (models.ManifestDoc, {"config": {"digest": 5}})]


@pytest.mark.parametrize(("model", "doc"), STRICT)
def test_strict_no_value_is_coerced_to_the_type_read(model: type[models.Model], doc: dict[str, Any]) -> None:
    with pytest.raises(models.ShapeError):
        models.parse(model, json.dumps(doc), "strict")


def test_strict_no_container_is_coerced_either() -> None:
    """A tuple is no list (a record row or a fake's document is validated as Python values, not JSON)."""
    with pytest.raises(models.ShapeError, match="valid list"):
        models.parse_value(models.ManifestDoc, {"layers": (descriptor(),)}, "strict")


def test_a_tag_list_past_its_read_cap_is_refused_before_it_is_parsed(server: Start) -> None:
    body = json.dumps({"tags": ["t" * (models.MAX_TAG_LIST_BYTES + 1)]}).encode()
    scripted = server(lambda seen: (200, {"Content-Type": "application/json"}, body))
    with pytest.raises(RegistryError, match=f"more than the {models.MAX_TAG_LIST_BYTES}"):
        RegistryClient(scripted.address, policy=FAST).tags("ns/r")


def sha(body: bytes) -> str:
    return "sha256:" + hashlib.sha256(body).hexdigest()


def test_an_sbom_past_its_read_cap_is_refused_before_it_is_parsed(server: Start,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        monkeypatch.delenv(name, raising=False)
    big = json.dumps({"bomFormat": "CycloneDX", "components": [], "x": "y" * models.MAX_SBOM_BYTES}).encode()
    image = json.dumps({"schemaVersion": 2, "config": descriptor(), "layers": []}).encode()
    artifact = json.dumps({"schemaVersion": 2, "artifactType": sbom.MEDIA_TYPE, "config": descriptor(),
                           "layers": [{"mediaType": sbom.MEDIA_TYPE, "digest": sha(big), "size": len(big)}]}).encode()
    index = json.dumps({"manifests": [{"mediaType": "application/vnd.oci.image.manifest.v1+json",
                                       "digest": sha(artifact), "size": len(artifact),
                                       "artifactType": sbom.MEDIA_TYPE}]}).encode()

    def answer(seen: Seen) -> Reply:
        path = seen.path.split("?")[0]
        if "/referrers/" in path:
            return 200, {"Content-Type": "application/vnd.oci.image.index.v1+json"}, index
        if path.endswith(f"/manifests/{sha(artifact)}"):
            return 200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, artifact
        if "/manifests/" in path:
            return 200, {"Content-Type": "application/vnd.oci.image.manifest.v1+json"}, image
        return (200, {}, big) if path.endswith(sha(big)) else (404, {}, b"")
    scripted = server(answer)
    with pytest.raises(RegistryError, match=f"more than the {models.MAX_SBOM_BYTES}"):
        diff.fetch(diff.parse_ref(f"{scripted.address}/ns/r:tag", "A"))
