"""builder.render.sources: pip's index or a read-only wheelhouse, its mounts, and each locked step's wheels."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builder.core import wheels
from builder.render.sources import PIP_CACHE, WHEELS_MOUNT, WheelSource, pinned_wheels, step_wheels, usable


def cell(index_url: str) -> Any:
    """Only the index URL is read: a stand-in, whatever else a cell of any channel holds."""
    return SimpleNamespace(index_url=index_url)


@pytest.mark.parametrize(("url", "args"), [
    ("https://download.pytorch.org/whl/rocm7.2", ["--index-url", "https://download.pytorch.org/whl/rocm7.2"]),
    ("http://mirror.lan:8080/simple", ["--index-url", "http://mirror.lan:8080/simple", "--trusted-host", "mirror.lan"]),
])
def test_the_cells_index_and_a_plain_http_one_is_trusted_by_name(url: str, args: list[str]) -> None:
    assert WheelSource().pip_args(cell(url)) == args


def test_a_wheelhouse_is_the_only_source_and_comes_in_read_only(tmp_path: Path) -> None:
    source = WheelSource(tmp_path)
    assert source.pip_args(cell("https://x")) == ["--no-index", "--find-links", WHEELS_MOUNT]
    assert source.mounts() == [PIP_CACHE, f"--mount=type=bind,source=wheels,target={WHEELS_MOUNT}"]
    folder = "wheels/0123456789ab"
    assert source.mounts(folder)[1] == f"--mount=type=bind,source={folder},target={WHEELS_MOUNT}"
    assert WheelSource().mounts() == [PIP_CACHE]


def test_describe_says_where_and_whether_locked(tmp_path: Path) -> None:
    assert WheelSource().describe(cell("https://x")) == "https://x"
    assert WheelSource(tmp_path, tmp_path).describe(cell("https://x")) == (
        "local wheelhouse (--wheelhouse), exactly the wheels of lock/ (--require-hashes)")


def test_a_steps_wheels_are_named_by_its_lock() -> None:
    assert step_wheels("a==1\n") == step_wheels("a==1\n") != step_wheels("a==2\n")
    assert step_wheels("a==1\n").startswith("wheels/") and len(step_wheels("")) == len("wheels/") + 12


PINS = (("torch", ("2.13.0+cpu",)), ("torchvision", ("0.28.0+cpu",)))


@pytest.mark.parametrize(("name", "ok"), [
    ("torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", True),
    ("torch-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", False),  # another combination's torch
    ("torch-2.13.0+rocm7.2-cp311-cp311-manylinux_2_28_x86_64.whl", False),  # `==2.13.0+cpu` is that local only
    ("torchvision-0.28.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", True),
    ("torchvision-0.27.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", False),
    ("torchaudio-2.12.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl", True),  # not pinned here: pip decides
    ("numpy-2.4.6-cp311-cp311-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl", True),
])
def test_a_combination_can_use_every_wheel_but_other_versions_of_what_it_pins(tmp_path: Path, name: str,
                                                                               ok: bool) -> None:
    """Names as download.pytorch.org's CPU index spells them (its torch and torchvision pages)."""
    (tmp_path / name).write_bytes(b"wheel")
    [wheel] = wheels.wheels(tmp_path)
    assert usable(wheel, PINS) is ok
    assert usable(wheel, (("torch", ("2.13.0",)),)) is (not name.startswith("torch-") or "2.13.0" in name)


def test_a_combinations_folder_is_named_by_its_pins() -> None:
    assert pinned_wheels(PINS) == pinned_wheels(tuple(PINS)) != pinned_wheels(PINS[:1])
    assert pinned_wheels(PINS).startswith("wheels/") and pinned_wheels(PINS) != step_wheels("torch==2.13.0+cpu")


def test_a_nightly_combination_keeps_its_own_pre_release_torch(tmp_path: Path) -> None:
    """Nightly cells pin a pre-release exactly (download.pytorch.org/whl/nightly/cpu's names): `==` with a
    pre-release matches it, and pip installs it, so its wheel stays in the combination's folder."""
    name = "torch-2.14.0.dev20261128+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    (tmp_path / name).write_bytes(b"wheel")
    [wheel] = wheels.wheels(tmp_path)
    assert usable(wheel, (("torch", ("2.14.0.dev20261128+cpu",)),))
    assert not usable(wheel, (("torch", ("2.14.0.dev20261127+cpu",)),))
