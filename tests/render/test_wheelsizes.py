"""The sizes `builder lock` records: a wheel's by its index (a file's length, a HEAD's Content-Length), a base
image's from its manifest; None wherever nobody says."""

from __future__ import annotations

import json
from pathlib import Path

from builder.registry.client import Manifest
from builder.render import wheelsizes
from testkit.synthwheels import WheelIndex, wheel


def test_a_wheelhouse_file_and_a_served_wheel_are_sized_by_their_bytes(tmp_path: Path) -> None:
    (tmp_path / "wheels").mkdir()
    made = wheel(tmp_path / "wheels", "rif-sized", "1.0", payload=b"x" * 5000)
    served = WheelIndex(tmp_path / "wheels", "127.0.0.1")
    try:
        url = served.url.replace("/simple/", f"/files/rif-sized/{made.name}")
        found = wheelsizes.sizes([made.as_uri(), url, url + ".missing", (tmp_path / "nope.whl").as_uri(),
                                  "ftp://example.invalid/x.whl", ""])
    finally:
        served.close()
    assert found == [made.stat().st_size, made.stat().st_size, None, None, None, None]
    assert not served.downloads, "a HEAD is no download"


class Api:
    """The one call image_size makes of a RegistryClient: a manifest by digest."""

    def __init__(self, children: dict[str, bytes]) -> None:
        self.children = children

    def manifest(self, repository: str, reference: str) -> Manifest | None:
        body = self.children.get(reference)
        return Manifest(body, "application/vnd.oci.image.manifest.v1+json", reference) if body else None


def image(config: int, *layers: int) -> bytes:
    return json.dumps({"schemaVersion": 2, "config": {"size": config},
                       "layers": [{"size": n} for n in layers]}).encode()


def test_a_base_image_is_sized_by_its_amd64_manifests_config_and_layers() -> None:
    assert wheelsizes.image_size(Api({}), "library/debian", image(100, 1000, 2000)) == 3100  # type: ignore[arg-type]
    index = json.dumps({"mediaType": "application/vnd.oci.image.index.v1+json", "manifests": [
        {"digest": "sha256:arm", "platform": {"os": "linux", "architecture": "arm64"}},
        {"digest": "sha256:amd", "platform": {"os": "linux", "architecture": "amd64"}}]}).encode()
    api = Api({"sha256:amd": image(10, 20, 30), "sha256:arm": image(1, 1)})
    assert wheelsizes.image_size(api, "library/debian", index) == 60  # type: ignore[arg-type]
    only_arm = json.dumps({"manifests": [{"digest": "sha256:arm", "platform": {"os": "linux",
                                                                              "architecture": "arm64"}}]}).encode()
    assert wheelsizes.image_size(api, "library/debian", only_arm) is None  # type: ignore[arg-type]
    for bad in (b"{", b"[]", json.dumps({"config": {"size": "x"}, "layers": []}).encode(), image(0)):
        assert wheelsizes.image_size(api, "library/debian", bad) is None  # type: ignore[arg-type]
