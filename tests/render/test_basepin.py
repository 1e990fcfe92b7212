"""`builder lock` records which archive snapshot a base image was made from (`builder base --snapshot T` labels it
T), read from the base's config on its registry mirror; a scripted registry on loopback stands in for the mirror,
and a stand-in for pip pins the wheels."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.core import tags
from builder.render import basepin, lockfile, resolve
from testkit.matrices import BARE_TORCH, cpu_matrix, load_cells
from testkit.scripted_registry import Reply, Scripted, Seen

MATRIX = cpu_matrix(BARE_TORCH) + "  flavor: [runtime]\n"
SNAP = "20261101T000000Z"
OCI = "application/vnd.oci.image.manifest.v1+json"


def mirror_of(labels: dict[str, str]) -> Callable[[Seen], Reply]:
    """A mirror serving debian:12 whose config carries labels."""
    config = json.dumps({"architecture": "amd64", "os": "linux", "config": {"Labels": labels}}).encode()
    config_digest = "sha256:" + hashlib.sha256(config).hexdigest()
    body = json.dumps({"schemaVersion": 2, "mediaType": OCI, "layers": [],
                       "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                                  "size": len(config)}}).encode()
    digest = "sha256:" + hashlib.sha256(body).hexdigest()

    def answer(seen: Seen) -> Reply:
        if seen.path in ("/v2/debian/manifests/12", f"/v2/debian/manifests/{digest}"):
            return 200, {"Content-Type": OCI, "Docker-Content-Digest": digest}, body
        if seen.path == f"/v2/debian/blobs/{config_digest}":
            return 200, {}, config
        return 404, {}, b""
    return answer


def lock_base(tmp_path: Path, mirror: Scripted, monkeypatch: pytest.MonkeyPatch) -> resolve.LockReport:
    monkeypatch.setattr(resolve, "resolve", lambda step, after, cell, wheelhouse: [
        lockfile.Pin(f"pkg-{step.file.removesuffix('.txt')}", "1.0", "b" * 64)])
    return resolve.lock_tree(load_cells(tmp_path, MATRIX), tmp_path / "tree", base_registry=mirror.address)


def base_lock(tmp_path: Path) -> str:
    [path] = (tmp_path / "tree").glob("*/lock/base.txt")
    return path.read_text()


def test_a_base_made_from_a_snapshot_is_locked_with_its_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 server: Callable[..., Scripted]) -> None:
    mirror = server(mirror_of({tags.SNAPSHOT_LABEL: SNAP}))
    report = lock_base(tmp_path, mirror, monkeypatch)
    assert not report.errors
    text = base_lock(tmp_path)
    assert lockfile.snapshot_of(text) == SNAP and f"\nsnapshot: {SNAP}\n" in text
    assert lockfile.pinned_base(text).startswith(f"{mirror.address}/debian:12@sha256:")
    assert lockfile.read_lock(next((tmp_path / "tree").glob("*/lock/base.txt"))) == text  # the grammar takes it


def test_a_base_without_the_label_is_locked_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      server: Callable[..., Scripted]) -> None:
    lock_base(tmp_path, server(mirror_of({"maintainer": "someone"})), monkeypatch)
    text = base_lock(tmp_path)
    assert lockfile.snapshot_of(text) is None and "snapshot" not in text


def test_a_snapshot_label_that_is_no_timestamp_is_a_data_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               server: Callable[..., Scripted]) -> None:
    report = lock_base(tmp_path, server(mirror_of({tags.SNAPSHOT_LABEL: "yesterday\nsnapshot: x"})), monkeypatch)
    [error] = report.errors
    assert error.step == "base.txt" and "is not a UTC timestamp" in error.missing, error
    assert not list((tmp_path / "tree").glob("*/lock/base.txt"))


def test_a_base_tag_the_registry_lacks_is_a_base_error_naming_it(server: Callable[..., Scripted]) -> None:
    mirror = server(mirror_of({}))
    with pytest.raises(basepin.BaseError, match="debian:99: no such tag"):
        basepin.pin_sized("debian:99", mirror.address, frozenset({mirror.address}))
    pinned, size = basepin.pin_sized("debian:12", mirror.address, frozenset({mirror.address}))
    assert pinned.startswith(f"{mirror.address}/debian:12@sha256:") and size is not None
