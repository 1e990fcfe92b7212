"""builder.registry.models: a registry's JSON parsed into typed shapes; a wrong shape is one ShapeError naming it."""

from __future__ import annotations

import json

import pytest

from builder.registry import models
from builder.registry.errors import RegistryError

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
