"""`builder lock` against a real pip, a real HTTP index (synthetic TheRock-shaped wheels) and a real registry."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from builder.core.spec import CellSpec
from builder.render import lockfile, resolve
from testkit.matrices import load_cells
from testkit.synthwheels import WheelIndex, therock_like, wheel

pytestmark = [pytest.mark.docker, pytest.mark.registry]

MATRIX = ("matrix:\n  os: [debian-12]\n  platform: [rocm7.2]\n  channel: [local]\n"
          "  torch:\n    - {version: '2.13.0', torchvision: null, torchaudio: null}\n"
          "  gfx: [gfx94X-dcgpu, gfx1151]\n  flavor: [runtime, devel]\n")


@pytest.fixture
def index(tmp_path: Path) -> Iterator[WheelIndex]:
    therock_like(tmp_path / "wheels", ["gfx942", "gfx1151"])
    served = WheelIndex(tmp_path / "wheels", "127.0.0.1")
    yield served
    served.close()


@pytest.fixture
def mirror(registry: str, base_image: str, namespace: str, docker_client: docker.DockerClient) -> str:
    """A registry serving the base image, as a Docker Hub mirror would."""
    docker_client.images.get(base_image).tag(f"{namespace}/debian", "12")
    docker_client.images.push(f"{namespace}/debian", "12")
    return namespace


def cells_of(tmp_path: Path, index: WheelIndex) -> list[CellSpec]:
    return [c.model_copy(update={"index_url": index.url}) for c in load_cells(tmp_path, MATRIX)]


def lock_files(tree: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(tree.glob("*/lock/*.txt"))}


def test_lock_pins_every_wheel_by_the_sha256_of_the_served_file(tmp_path: Path, index: WheelIndex,
                                                                 mirror: str) -> None:
    tree = tmp_path / "tree"
    report = resolve.lock_tree(cells_of(tmp_path, index), tree, base_registry=mirror)
    files = lock_files(tree)
    assert set(files) == {"base.txt", "torch.txt", "torch-deps.txt", "runtime-gfx94x-dcgpu-device.txt",
                          "runtime-gfx94x-dcgpu.txt", "runtime-gfx1151-device.txt", "runtime-gfx1151.txt"}
    assert len(report.written) == 7 and not report.kept
    served = {hashlib.sha256(w.read_bytes()).hexdigest(): w.name for w in (tmp_path / "wheels").glob("*.whl")}
    pins = {f: [(p.name, p.version) for p in lockfile.pins_of(t)] for f, t in files.items() if f != "base.txt"}
    assert pins == {"torch.txt": [("torch", "2.13.0")], "torch-deps.txt": [("rif-rocm-libraries", "1.0")],
                    "runtime-gfx94x-dcgpu-device.txt": [("rif-device-gfx942", "2.13.0")],
                    "runtime-gfx94x-dcgpu.txt": [("numpy", "2.4.6")],
                    "runtime-gfx1151-device.txt": [("rif-device-gfx1151", "2.13.0")],
                    "runtime-gfx1151.txt": [("numpy", "2.4.6")]}
    assert all(p.sha256 in served for f, t in files.items() if f != "base.txt" for p in lockfile.pins_of(t))
    assert lockfile.pinned_base(files["base.txt"]).startswith(f"{mirror}/debian:12@sha256:")
    # Each wheel's size as the index serves it (its Content-Length), and the base's compressed size.
    lengths = {hashlib.sha256(w.read_bytes()).hexdigest(): w.stat().st_size
               for w in (tmp_path / "wheels").glob("*.whl")}
    assert all(p.size == lengths[p.sha256] for f, t in files.items() if f != "base.txt" for p in lockfile.pins_of(t))
    assert lockfile.recorded_size(files["base.txt"]) > 1_000_000


def test_lock_keeps_fresh_locks_and_update_moves_only_what_changed(tmp_path: Path, index: WheelIndex,
                                                                   mirror: str) -> None:
    tree = tmp_path / "tree"
    cells = cells_of(tmp_path, index)
    resolve.lock_tree(cells, tree, base_registry=mirror)
    before = lock_files(tree)
    wheel(tmp_path / "wheels", "numpy", "2.4.7", payload=b"m" * 64)  # the index now serves a newer numpy
    again = resolve.lock_tree(cells, tree, base_registry=mirror)
    assert lock_files(tree) == before and not again.written  # without --update, fresh locks keep their pins
    updated = resolve.lock_tree(cells, tree, update=True, base_registry=mirror)
    assert sorted(p.name for p in updated.written) == ["runtime-gfx1151.txt", "runtime-gfx94x-dcgpu.txt"]
    after = lock_files(tree)
    assert [(p.name, p.version) for p in lockfile.pins_of(after["runtime-gfx1151.txt"])] == [("numpy", "2.4.7")]
    assert {f for f in before if before[f] != after[f]} == {"runtime-gfx1151.txt", "runtime-gfx94x-dcgpu.txt"}


def test_a_requirement_no_wheel_satisfies_is_a_clear_error(tmp_path: Path, index: WheelIndex, mirror: str) -> None:
    """A step no wheel satisfies is a data error naming the lock file and what pip missed (issue 30: the other
    steps' locks are still refreshed, so the run reports it rather than raising)."""
    cells = [c.model_copy(update={"torch": "2.99.0"}) for c in cells_of(tmp_path, index)]
    report = resolve.lock_tree(cells, tmp_path / "tree", base_registry=mirror)
    lines = [e.line() for e in report.errors]
    assert any("torch.txt" in line and "torch==2.99.0" in line and "Python 3.11" in line for line in lines), lines


def test_a_base_tag_the_registry_lacks_is_a_clear_error(registry: str, namespace: str) -> None:
    with pytest.raises(resolve.LockError, match=rf"base image {namespace}/debian:12: no such tag"):
        resolve.pin_base("debian:12", namespace, frozenset())
