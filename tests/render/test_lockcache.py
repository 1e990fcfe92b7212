"""`builder lock --update --index-cache DIR` against a real pip and a loopback index that answers conditional
requests as PyPI does (testkit/simpleindex.py): a warm cache over an unchanged index resolves nothing again
(only conditional requests, every one answered 304, and pip never asked), a changed page re-resolves exactly the
steps that read it, and a cache file that lies is a miss, never an error. The base image's digest comes from a
stand-in for pin_base, as in test_resolve_errors.py."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core.spec import CellSpec
from builder.matrix.expand import load_matrix
from builder.render import indexpages, lockcache, lockfile, resolve
from testkit.matrices import write_matrix
from testkit.simpleindex import SimpleIndex
from testkit.synthwheels import therock_like, wheel

MATRIX = """\
index_urls: {{rocm7.2: "{url}"}}
matrix:
  os: [debian-12]
  platform: [rocm7.2]
  channel: [local]
  torch:
    - {{version: '2.13.0', torchvision: null, torchaudio: null}}
  gfx: [gfx94X-dcgpu, gfx1151]
  flavor: [runtime]
"""
PIP_STEPS = {"torch.txt", "torch-deps.txt", "runtime-gfx94x-dcgpu-device.txt", "runtime-gfx94x-dcgpu.txt",
             "runtime-gfx1151-device.txt", "runtime-gfx1151.txt"}
DIGEST = "sha256:" + hashlib.sha256(b"debian:12").hexdigest()


@pytest.fixture
def index(tmp_path: Path) -> Iterator[SimpleIndex]:
    therock_like(tmp_path / "wheels", ["gfx942", "gfx1151"])
    served = SimpleIndex(tmp_path / "wheels")
    yield served
    served.close()


@pytest.fixture(autouse=True)
def base(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve, "pin_base", lambda ref, registry, insecure: f"{ref}@{DIGEST}")


def cells_of(tmp_path: Path, index: SimpleIndex) -> list[CellSpec]:
    return load_matrix(write_matrix(tmp_path, MATRIX.format(url=index.url)))


def lock_files(tree: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(tree.glob("*/lock/*.txt"))}


def refresh(tmp_path: Path, index: SimpleIndex, cache: lockcache.LockCache) -> resolve.LockReport:
    return resolve.lock_tree(cells_of(tmp_path, index), tmp_path / "tree", update=True, cache=cache)


def test_a_warm_cache_over_an_unchanged_index_asks_only_conditionally_and_resolves_nothing(
        tmp_path: Path, index: SimpleIndex) -> None:
    cold = lockcache.LockCache(tmp_path / "cache")
    refresh(tmp_path, index, cold)
    assert len(cold.resolved) == len(PIP_STEPS) and not cold.reused
    before, seen = lock_files(tmp_path / "tree"), len(index.requests)
    warm = lockcache.LockCache(tmp_path / "cache")
    report = refresh(tmp_path, index, warm)
    assert not warm.resolved and len(warm.reused) == len(PIP_STEPS)
    assert not report.written and lock_files(tmp_path / "tree") == before
    night = index.requests[seen:]
    odd = [r for r in night if not (r.conditional and r.status == 304 and r.agent == indexpages.USER_AGENT)]
    assert night and not odd, odd
    assert len({r.path for r in night}) == len(night) == warm.checks.requests  # each page once, shared by steps


def test_a_changed_page_re_resolves_exactly_the_steps_that_read_it(tmp_path: Path, index: SimpleIndex) -> None:
    refresh(tmp_path, index, lockcache.LockCache(tmp_path / "cache"))
    wheel(tmp_path / "wheels", "numpy", "2.4.7", payload=b"m" * 64)  # numpy's page changes, no other
    os.utime(tmp_path / "wheels" / "numpy-2.4.7-py3-none-any.whl", (2e9, 2e9))
    warm = lockcache.LockCache(tmp_path / "cache")
    report = refresh(tmp_path, index, warm)
    assert sorted(p.name for p in report.written) == ["runtime-gfx1151.txt", "runtime-gfx94x-dcgpu.txt"]
    assert len(warm.resolved) == 2 and len(warm.reused) == len(PIP_STEPS) - 2
    after = lock_files(tmp_path / "tree")
    assert [(p.name, p.version) for p in lockfile.pins_of(after["runtime-gfx1151.txt"])] == [("numpy", "2.4.7")]


def entries(folder: Path) -> list[Path]:
    return sorted((folder / lockcache.STEPS_DIR).glob("*.json"))


LIES = ["off-index page", "other lock", "bad grammar", "not json", "too large", "a link", "other key"]


def lied(entry: Path, lie: str, elsewhere: Path) -> None:
    data = json.loads(entry.read_text())
    if lie == "off-index page":
        data["pages"][0]["url"] = data["pages"][0]["url"].replace("/simple/", "/elsewhere/")
    elif lie == "other lock":
        data["lock"] = data["lock"].replace('"python": "3.11"', '"python": "3.12"')
    elif lie == "bad grammar":
        data["lock"] += "--extra-index-url http://evil/\n"
    elif lie == "other key":
        data["key"] = "0" * 64
    text = {"not json": "{" * 100_000, "too large": " " * lockcache.MAX_ENTRY_BYTES + "{}"}.get(lie, json.dumps(data))
    entry.unlink()
    if lie == "a link":
        elsewhere.write_text(text)
        entry.symlink_to(elsewhere)
    else:
        entry.write_text(text)


def test_a_cache_file_that_lies_is_resolved_again_never_trusted(tmp_path: Path, index: SimpleIndex) -> None:
    refresh(tmp_path, index, lockcache.LockCache(tmp_path / "cache"))
    for lie in LIES:
        folder = tmp_path / lie.replace(" ", "-")
        shutil.copytree(tmp_path / "cache", folder)
        lied(entries(folder)[0], lie, tmp_path / f"{folder.name}.json")
        warm = lockcache.LockCache(folder)
        refresh(tmp_path, index, warm)
        assert (len(warm.resolved), len(warm.reused)) == (1, len(PIP_STEPS) - 1), lie
    assert not [r for r in index.requests if "/elsewhere/" in r.path]  # never asked off the index


def test_an_entry_older_than_its_spread_is_resolved_again_and_pruned(tmp_path: Path, index: SimpleIndex) -> None:
    refresh(tmp_path, index, lockcache.LockCache(tmp_path / "cache", clock=lambda: 1e9))
    late = lockcache.LockCache(tmp_path / "cache", clock=lambda: 1e9 + lockcache.DAY_S * 14)
    assert late.prune() == len(PIP_STEPS) and not entries(tmp_path / "cache")
    soon = lockcache.LockCache(tmp_path / "cache", clock=lambda: 2e9)
    refresh(tmp_path, index, soon)
    later = lockcache.LockCache(tmp_path / "cache", clock=lambda: 2e9 + lockcache.DAY_S * 6.9)
    refresh(tmp_path, index, later)
    assert len(later.reused) == len(PIP_STEPS) and later.prune() == 0


def test_combinations_are_resolved_concurrently(tmp_path: Path, index: SimpleIndex,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Two combinations' first steps are in flight at once with workers=2 (each waits for the other's)."""
    text = MATRIX.format(url=index.url).replace("gfx: [gfx94X-dcgpu, gfx1151]", "gfx: [gfx1151]")
    text = text.replace("os: [debian-12]", "os: [debian-12, ubuntu-24.04]")
    cells = load_matrix(write_matrix(tmp_path, text))
    both = threading.Barrier(2, timeout=60)
    pin = resolve.pin_base

    def meet(ref: str, registry: str | None, insecure: frozenset[str]) -> str:
        both.wait()
        return pin(ref, registry, insecure)

    monkeypatch.setattr(resolve, "pin_base", meet)
    report = resolve.lock_tree(cells, tmp_path / "tree", update=True, workers=2)
    assert not report.errors and len({p.parent.parent.name for p in report.written}) == 2


def test_the_lock_command_says_what_the_cache_saved(tmp_path: Path, index: SimpleIndex) -> None:
    matrix = write_matrix(tmp_path, MATRIX.format(url=index.url))
    args = ["lock", "--matrix", str(matrix), "--out", str(tmp_path / "tree"), "--update", "--apt-snapshot", "off",
            "--index-cache", str(tmp_path / "cache"), "--jobs", "2"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    assert f"index cache: {len(PIP_STEPS)} steps reused" in second.output and "0 resolved by pip" in second.output
