"""builder.render.sources: pip's index or a read-only wheelhouse, its mounts, and each locked step's wheels."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builder.render.sources import PIP_CACHE, WHEELS_MOUNT, WheelSource, step_wheels


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
    assert WheelSource().mounts() == [PIP_CACHE]


def test_describe_says_where_and_whether_locked(tmp_path: Path) -> None:
    assert WheelSource().describe(cell("https://x")) == "https://x"
    assert WheelSource(tmp_path, tmp_path).describe(cell("https://x")) == (
        "local wheelhouse (--wheelhouse), exactly the wheels of lock/ (--require-hashes)")


def test_a_steps_wheels_are_named_by_its_lock() -> None:
    assert step_wheels("a==1\n") == step_wheels("a==1\n") != step_wheels("a==2\n")
    assert step_wheels("a==1\n").startswith("wheels/") and len(step_wheels("")) == len("wheels/") + 12
