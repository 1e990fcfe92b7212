"""An image exported straight into the engine has no layout to list its blobs: the push mounts the cache layers
whose uncompressed digest (BuildKit's `containerd.io/uncompressed`) is one of the image's diff IDs, read from the
target's cache manifest as hostile input. The mounts against a real registry: tests/publish/test_promote.py."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from builder.publish.promote import UNCOMPRESSED, Target
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError


def digest(c: str) -> str:
    return "sha256:" + c * 64


def layer(blob: str, diff: str | None, **extra: object) -> dict[str, Any]:
    notes = {"buildkit/createdat": "2026-11-28T00:00:00Z", **({UNCOMPRESSED: diff} if diff else {})}
    return {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": blob, "size": 1,
            "annotations": notes, **extra}


class Api:
    def __init__(self, body: bytes | None, fail: bool = False) -> None:
        self.body, self.fail, self.asked = body, fail, []  # type: ignore[var-annotated]

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        self.asked.append(f"{repository}:{reference}")
        if self.fail:
            raise RegistryError("503")
        return Manifest(self.body, "application/vnd.oci.image.manifest.v1+json", digest("0")) if self.body else None


def engine(*diff_ids: str) -> Any:
    image = SimpleNamespace(attrs={"RootFS": {"Type": "layers", "Layers": list(diff_ids)}})
    return SimpleNamespace(images=SimpleNamespace(get=lambda ref: image))


def cached(api: Api, client: Any, tag: str | None = "rocm-gfx942") -> tuple[str, ...]:
    target = Target("127.0.0.1:5000/ns", api, None)  # type: ignore[arg-type]
    return target._cached_layers(client, digest("f"), "ns/buildcache", tag)


def manifest(*layers: dict[str, Any]) -> bytes:
    return json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                       "config": {"mediaType": "application/vnd.buildkit.cacheconfig.v0", "digest": digest("c"),
                                  "size": 9}, "layers": list(layers)}).encode()


def test_the_image_s_own_layers_of_the_target_s_cache_manifest_are_mounted_and_no_other() -> None:
    body = manifest(layer(digest("1"), digest("a")), layer(digest("2"), digest("b")),  # a builder stage's
                    layer(digest("3"), digest("c")), layer(digest("4"), None))
    api = Api(body)
    assert cached(api, engine(digest("a"), digest("c"))) == (digest("1"), digest("3"))
    assert api.asked == ["ns/buildcache:rocm-gfx942"]


def test_a_cache_manifest_that_is_missing_unreadable_or_lies_mounts_nothing_it_names_wrongly() -> None:
    client = engine(digest("a"))
    assert cached(Api(None), client) == ()
    assert cached(Api(b"{not json"), client) == ()
    assert cached(Api(manifest(layer(digest("1"), digest("a"))), fail=True), client) == ()
    assert cached(Api(manifest(layer("sha256:../../x", digest("a")))), client) == ()  # no digest: never mounted
    assert cached(Api(json.dumps({"layers": "x"}).encode()), client) == ()
    assert cached(Api(manifest(layer(digest("1"), digest("a")))), client, tag=None) == ()  # no target: not asked
