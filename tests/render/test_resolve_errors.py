"""`builder lock` when the data promises wheels an index does not serve: a real pip against an HTTP index on loopback
that serves some cells' wheels and not others. Each unresolvable image is reported once (cell, index, what was
missing), every other lock is still written, and --check-data writes nothing. No registry: the base image's digest
comes from a stand-in for pin_base (its registry path is tests/render/test_resolve.py's, marked registry)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.matrix.expand import load_matrix
from builder.render import resolve
from testkit.matrices import write_matrix
from testkit.synthwheels import WheelIndex, therock_like

# torch 2.13.0 with device packages for gfx942 only (gfx1151's is missing), and no torch 2.12.0 at all.
MATRIX = """\
index_urls: {{rocm7.2: "{url}"}}
matrix:
  os: [debian-12]
  platform: [rocm7.2]
  channel: [local]
  torch:
    - {{version: '2.13.0', torchvision: null, torchaudio: null}}
    - {{version: '2.12.0', torchvision: null, torchaudio: null}}
  gfx: [gfx94X-dcgpu, gfx1151]
  flavor: [runtime]
"""
TAG = "rocm7.2_debian12_py3.11_torch{torch}_{gfx}_local_runtime"
DIGEST = "sha256:" + hashlib.sha256(b"debian:12").hexdigest()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[WheelIndex]:
    therock_like(tmp_path / "wheels", ["gfx942", "gfx1151"])
    (tmp_path / "wheels" / "rif_device_gfx1151-2.13.0-py3-none-any.whl").unlink()
    served = WheelIndex(tmp_path / "wheels", "127.0.0.1")
    yield served
    served.close()


@pytest.fixture
def base(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """pin_base without a registry: debian:12 has a digest, and every call is recorded."""
    asked: list[str] = []

    def pin(ref: str, registry: str | None, insecure: frozenset[str]) -> str:
        asked.append(ref)
        if ref != "debian:12":
            raise resolve.LockError(f"base image {ref}: no such tag in registry-1.docker.io")
        return f"{ref}@{DIGEST}"

    monkeypatch.setattr(resolve, "pin_base", pin)
    return asked


def locks(tree: Path) -> set[str]:
    return {f"{p.parent.parent.name}/{p.name}" for p in tree.glob("*/lock/*.txt")}


def test_update_reports_exactly_the_unresolvable_cells_and_locks_the_rest(tmp_path: Path, index: WheelIndex,
                                                                          base: list[str]) -> None:
    cells = load_matrix(write_matrix(tmp_path, MATRIX.format(url=index.url)))
    tree = tmp_path / "tree"
    report = resolve.lock_tree(cells, tree, update=True)
    errors = {(e.cells, e.index, e.step) for e in report.errors}
    assert errors == {
        ((TAG.format(torch="2.13.0", gfx="gfx1151"),), index.url, "runtime-gfx1151-device.txt"),
        ((TAG.format(torch="2.12.0", gfx="gfx94X-dcgpu"), TAG.format(torch="2.12.0", gfx="gfx1151")), index.url,
         "torch.txt"),
    }
    missing = {e.step: e.missing for e in report.errors}
    assert "rif-device-gfx1151" in missing["runtime-gfx1151-device.txt"]
    assert "torch==2.12.0" in missing["torch.txt"]
    assert report.failed_cells == {TAG.format(torch="2.13.0", gfx="gfx1151"), TAG.format(torch="2.12.0", gfx="gfx1151"),
                                   TAG.format(torch="2.12.0", gfx="gfx94X-dcgpu")}
    # the gfx942 image is locked completely; the 2.12.0 combination keeps its base, nothing built on torch
    group13, group12 = "rocm7.2_debian12_py3.11_torch2.13.0_local", "rocm7.2_debian12_py3.11_torch2.12.0_local"
    assert locks(tree) == {f"{group13}/{f}" for f in ("base.txt", "torch.txt", "torch-deps.txt",
                                                       "runtime-gfx94x-dcgpu-device.txt", "runtime-gfx94x-dcgpu.txt")} \
        | {f"{group12}/base.txt"}


def test_a_missing_base_tag_is_a_data_error_of_every_image_on_it(tmp_path: Path, index: WheelIndex,
                                                                  base: list[str]) -> None:
    text = MATRIX.format(url=index.url).replace("debian-12", "debian-13")
    [cell] = [c for c in load_matrix(write_matrix(tmp_path, text)) if (c.torch, c.gfx) == ("2.13.0", "gfx94X-dcgpu")]
    tree = tmp_path / "tree"
    report = resolve.lock_tree([cell], tree, update=True)
    [base_error] = report.errors
    assert (base_error.cells, base_error.index, base_error.step) == ((cell.tag,), "Docker Hub", "base.txt")
    assert "debian:13" in base_error.missing and "no such tag" in base_error.missing
    assert {p.name for p in tree.glob("*/lock/*.txt")} == {"torch.txt", "torch-deps.txt",
                                                          "runtime-gfx94x-dcgpu-device.txt", "runtime-gfx94x-dcgpu.txt"}


def test_check_data_writes_nothing_lists_the_errors_and_exits_1(tmp_path: Path, index: WheelIndex,
                                                                 base: list[str]) -> None:
    matrix = write_matrix(tmp_path, MATRIX.format(url=index.url))
    tree, listing = tmp_path / "tree", tmp_path / "errors.md"
    run = CliRunner().invoke(app, ["lock", "--matrix", str(matrix), "--out", str(tree), "--check-data",
                                   "--data-errors", str(listing)])
    assert run.exit_code == 1, run.output
    assert not tree.exists()
    assert "2 data errors" in run.output
    lines = listing.read_text().splitlines()
    assert len(lines) == 2 and all(line.startswith("- `rocm7.2_debian12_py3.11_torch2.1") for line in lines)
    assert any("runtime-gfx1151-device.txt` from " + index.url in line for line in lines)


def test_update_refreshes_the_rest_renders_it_and_exits_1(tmp_path: Path, index: WheelIndex, base: list[str]) -> None:
    matrix = write_matrix(tmp_path, MATRIX.format(url=index.url))
    tree, listing = tmp_path / "tree", tmp_path / "errors.md"
    run = CliRunner().invoke(app, ["lock", "--matrix", str(matrix), "--out", str(tree), "--update",
                                   "--data-errors", str(listing)])
    assert run.exit_code == 1, run.output
    assert "rendered 1 images" in run.output
    assert sorted(p.name for p in (tree / "cells").iterdir()) == [TAG.format(torch="2.13.0", gfx="gfx94X-dcgpu")]
    assert len(listing.read_text().splitlines()) == 2
