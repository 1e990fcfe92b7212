"""builder.registry.models: a registry's JSON parsed into typed shapes; a wrong shape is one ShapeError naming it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any

import pytest

from builder.audit import diff
from builder.registry import models
from builder.registry.client import RegistryClient
from builder.registry.errors import RegistryError
from builder.validate import sbom
from testkit.scripted_registry import FAST, Reply, Scripted, Seen

DIGEST = "sha256:" + "a" * 64


def descriptor(os: str, arch: str) -> dict[str, object]:
    return {"mediaType": "m", "digest": DIGEST, "size": 1, "platform": {"os": os, "architecture": arch}}


def test_an_index_finds_its_platform_and_a_manifest_is_no_index() -> None:
    index = models.parse(models.ManifestDoc, json.dumps(
        {"schemaVersion": 2, "manifests": [descriptor("linux", "arm64"), descriptor("linux", "amd64")]}), "i")
    assert index.is_index and index.manifests is not None
    assert index.platform("linux", "amd64") is index.manifests[1]
    assert index.platform("windows", "amd64") is None
    manifest = models.parse(models.ManifestDoc, b'{"schemaVersion": 2, "layers": []}', "m")
    assert not manifest.is_index and manifest.platform("linux", "amd64") is None


def test_labels_of_a_config_with_and_without_them() -> None:
    config = models.parse(models.ImageConfig, b'{"config": {"Labels": {"a": "b"}}}', "c")
    assert config.labels == {"a": "b"}
    assert models.parse(models.ImageConfig, b"{}", "c").labels == {}
    assert models.parse(models.ImageConfig, b'{"config": {}}', "c").labels == {}


def test_a_tag_list_keeps_the_entries_that_are_tags() -> None:
    tags = models.parse(models.TagList, json.dumps({"tags": ["a", 1, None, "x" * 2000, "b"]}), "t")
    assert tags.names == ["a", "b"]
    assert models.parse(models.TagList, b'{"tags": null}', "t").names == []


@pytest.mark.parametrize(("body", "said"), [
    (b'{"config": "x"}', "r/x:t: config: "),
    (b'{"schemaVersion": "2"}', "r/x:t: schemaVersion: "),
    (b"not json", "r/x:t: not JSON (or nested too deeply)"),
    (b"[" * 100_000, "r/x:t: not JSON (or nested too deeply)"),
])
def test_a_wrong_shape_is_a_shape_error_naming_what_and_the_key(body: bytes, said: str) -> None:
    with pytest.raises(models.ShapeError) as exc:
        models.parse(models.ManifestDoc, body, "r/x:t")
    assert str(exc.value).startswith(said) and isinstance(exc.value, RegistryError)


def test_several_problems_are_counted_and_the_line_is_printable() -> None:
    with pytest.raises(models.ShapeError) as exc:
        models.parse_value(models.ImageConfig, {"os": 1, "architecture": 2, "created\n": 3, "config": {"Labels": {
            "k": ["v\n"]}}}, "f")
    assert "(and 2 more)" in str(exc.value) and "\n" not in str(exc.value)


def test_a_lone_surrogate_is_kept_visible_as_its_escape() -> None:
    config = models.parse(models.ImageConfig, b'{"config": {"Labels": {"a": "x\\udcff"}}}', "c")
    assert config.labels == {"a": "x\\udcff"}
    value = models.parse_value(models.ImageConfig, {"config": {"Labels": {"a\udcff": ["\udcff"][0]}}}, "c")
    assert value.labels == {"a\\udcff": "\\udcff"}


# -- error paths and hostile answers (issue 39) ----------------------------------------
# Each limit of the registry's models on its own: a document at the limit is read, one past it is a ShapeError.
# A test per limit, so removing any one of them fails its own test (the 50,000-layer catalog test passes with
# either the layer or the history limit gone). The tag-list and SBOM read caps are held through a scripted
# registry: a body one byte past the cap is refused before it is parsed.

Start = Callable[[Callable[[Seen], Reply]], Scripted]


def blob(**extra: Any) -> dict[str, Any]:
    return {"mediaType": "application/octet-stream", "digest": DIGEST, "size": 1, **extra}


def labels(n: int) -> dict[str, str]:
    return {f"k{i}": "v" for i in range(n)}


# (what, model, a document of n items / characters, the limit)
LIMITS: list[tuple[str, type[models.Model], Callable[[int], Any], int]] = [
    ("layers", models.ManifestDoc, lambda n: {"layers": [blob()] * n}, models.MAX_LAYERS),
    ("history", models.ImageConfig, lambda n: {"history": [{"created_by": "x"}] * n}, models.MAX_HISTORY),
    ("labels", models.ImageConfig, lambda n: {"config": {"Labels": labels(n)}}, models.MAX_LABELS),
    ("annotations", models.ManifestDoc, lambda n: {"config": blob(annotations=labels(n))}, models.MAX_LABELS),
    ("index entries", models.ManifestDoc, lambda n: {"manifests": [blob()] * n}, models.MAX_DESCRIPTORS),
    ("referrers", models.Referrers, lambda n: {"manifests": [blob()] * n}, models.MAX_DESCRIPTORS),
    ("tags listed", models.TagList, lambda n: {"tags": ["t"] * n}, models.MAX_TAGS_LISTED),
    ("label text", models.ImageConfig, lambda n: {"config": {"Labels": {"k": "x" * n}}}, models.MAX_TEXT_CHARS),
    ("history text", models.ImageConfig, lambda n: {"history": [{"created_by": "x" * n}]}, models.MAX_TEXT_CHARS),
    ("label key", models.ImageConfig, lambda n: {"config": {"Labels": {"k" * n: "v"}}}, models.MAX_NAME_CHARS),
    ("digest", models.ManifestDoc, lambda n: {"config": {"digest": "d" * n}}, models.MAX_NAME_CHARS),
    ("size", models.ManifestDoc, lambda n: {"config": blob(size=n)}, models.MAX_SIZE),
]


@pytest.mark.parametrize(("what", "model", "doc", "limit"), LIMITS, ids=[case[0] for case in LIMITS])
def test_each_limit_admits_its_limit_and_refuses_one_more(what: str, model: type[models.Model],
                                                          doc: Callable[[int], Any], limit: int) -> None:
    models.parse(model, json.dumps(doc(limit)), what)
    with pytest.raises(models.ShapeError):
        models.parse(model, json.dumps(doc(limit + 1)), what)


STRICT = [(models.ManifestDoc, {"config": blob(size="1")}), (models.ManifestDoc, {"schemaVersion": "2"}),
          (models.ManifestDoc, {"config": blob(size=1.0)}),
          (models.ManifestDoc, {"config": blob(size=True)}),
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
        models.parse_value(models.ManifestDoc, {"layers": (blob(),)}, "strict")


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
    image = json.dumps({"schemaVersion": 2, "config": blob(), "layers": []}).encode()
    artifact = json.dumps({"schemaVersion": 2, "artifactType": sbom.MEDIA_TYPE, "config": blob(),
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
