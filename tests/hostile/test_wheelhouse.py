"""Wheelhouse entries as hostile input: only a regular file named as a wheel (PEP 427), reached without a link out
of the wheelhouse, is hashed, linked or copied into a build tree; copies get 0644. No byte of a file outside the
wheelhouse reaches a build tree, whatever the wheelhouse holds.

CLI runs are subprocesses with a timeout (a FIFO would hang them) and a bounded address space.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from builder.core import wheels
from builder.render import imagetree
from builder.render.contenthash import wheel_sha256s, wheelhouse_digest
from builder.render.dockerfile import render_all
from builder.render.sources import WHEELS_DIR, WheelSource
from testkit.matrices import ONE_CPU, load_cells
from tests.fakes.checkout import builder_cli
from tests.hostile.test_locks import bind_socket

WHEEL = "torch-2.13.0-cp311-cp311-linux_x86_64.whl"
SECRET = b"PRIVATE-KEY-MATERIAL-0600"
AS_LIMIT = 1 << 31


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    wheel_sha256s.cache_clear()


@pytest.fixture
def house(tmp_path: Path) -> Path:
    folder = tmp_path / "wheelhouse"
    folder.mkdir()
    (folder / WHEEL).write_bytes(b"a wheel")
    return folder


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    path = tmp_path / "private" / "id_rsa"
    path.parent.mkdir()
    path.write_bytes(SECRET)
    path.chmod(0o600)
    return path


def linked(out: Path) -> Path:
    """The one combination's folder of wheels in the tree (sources.pinned_wheels): what its build mounts."""
    [folder] = (out / WHEELS_DIR).iterdir()
    return folder


def render_into(tmp_path: Path, house: Path) -> Path:
    out = tmp_path / "tree"
    source = WheelSource(house)
    imagetree.write(out, render_all(load_cells(tmp_path, ONE_CPU), source), prune=False, source=source)
    return out


def no_secret_in(folder: Path) -> bool:
    return all(SECRET not in p.read_bytes() for p in folder.rglob("*") if p.is_file())


def render_cli(tmp_path: Path, house: Path) -> subprocess.CompletedProcess[str]:
    (tmp_path / "matrix.yaml").write_text(ONE_CPU)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    return builder_cli("render", "--matrix", str(tmp_path / "matrix.yaml"), "--out", str(tmp_path / "tree"),
                       "--wheelhouse", str(house), env=env, timeout=60, limits={"RLIMIT_AS": AS_LIMIT})


def test_a_wheelhouse_of_wheels_is_linked_and_the_rest_is_left_out(tmp_path: Path, house: Path) -> None:
    (house / "README.txt").write_bytes(SECRET)
    (house / "twin-1.0-py3-none-any.whl").symlink_to(WHEEL)  # a link inside the wheelhouse is followed
    out = render_into(tmp_path, house)
    assert sorted(p.name for p in linked(out).iterdir()) == [WHEEL, "twin-1.0-py3-none-any.whl"]
    assert no_secret_in(out)


def _link_out(house: Path, secret: Path) -> None:
    (house / "evil-1.0-py3-none-any.whl").symlink_to(secret)


def _link_out_through_a_folder(house: Path, secret: Path) -> None:
    (house / "sub").symlink_to(secret.parent)
    (house / "evil-1.0-py3-none-any.whl").symlink_to(Path("sub") / secret.name)


def _dangling(house: Path, secret: Path) -> None:
    (house / "evil-1.0-py3-none-any.whl").symlink_to(house / "nowhere.whl")


def _loop(house: Path, secret: Path) -> None:
    (house / "evil-1.0-py3-none-any.whl").symlink_to("evil-1.0-py3-none-any.whl")


def _directory(house: Path, secret: Path) -> None:
    (house / "evil-1.0-py3-none-any.whl").mkdir()


def _device(house: Path, secret: Path) -> None:
    (house / "evil-1.0-py3-none-any.whl").symlink_to("/dev/zero")


def _no_wheel_name(house: Path, secret: Path) -> None:
    (house / "evil.whl").write_bytes(b"x")


def _bad_version(house: Path, secret: Path) -> None:
    (house / "evil-not~a~version-py3-none-any.whl").write_bytes(b"x")


def _socket(house: Path, secret: Path) -> None:
    bind_socket(house / "evil-1.0-py3-none-any.whl")


def _link_to_the_house_itself(house: Path, secret: Path) -> None:
    (house / "evil-1.0-py3-none-any.whl").symlink_to(".")


BAD: list[Callable[[Path, Path], None]] = [_link_out, _link_out_through_a_folder, _dangling, _loop, _directory,
                                           _device, _no_wheel_name, _bad_version, _socket, _link_to_the_house_itself]


@pytest.mark.parametrize("plant", BAD)
def test_an_entry_that_is_no_wheel_is_refused_by_name(tmp_path: Path, house: Path, secret: Path,
                                                      plant: Callable[[Path, Path], None]) -> None:
    plant(house, secret)
    with pytest.raises(wheels.WheelhouseError) as info:
        render_into(tmp_path, house)
    assert len(info.value.problems) == 1 and "evil" in info.value.problems[0]
    assert no_secret_in(tmp_path / "tree") if (tmp_path / "tree").exists() else True


@pytest.mark.parametrize("plant", [*BAD, lambda house, secret: os.mkfifo(house / "evil-1.0-py3-none-any.whl")])
def test_the_cli_says_which_entry_and_exits_2_in_time(tmp_path: Path, house: Path, secret: Path,
                                                      plant: Callable[[Path, Path], None]) -> None:
    plant(house, secret)
    proc = render_cli(tmp_path, house)
    assert proc.returncode == 2, proc.stderr
    assert "evil" in proc.stderr and "not a wheel" in proc.stderr
    assert "unexpected" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_locked_build_links_no_entry_out_of_the_wheelhouse(tmp_path: Path, house: Path, secret: Path) -> None:
    from tests.render.test_lockfile import write_locks

    tree = tmp_path / "tree"
    write_locks(tree, load_cells(tmp_path, ONE_CPU))
    _link_out(house, secret)
    source = WheelSource(house, tree)
    with pytest.raises(wheels.WheelhouseError):
        imagetree.write(tree, render_all(load_cells(tmp_path, ONE_CPU), source), prune=False, source=source)
    assert no_secret_in(tree)


def test_a_wheel_with_more_permission_than_it_needs_is_copied_with_0644(tmp_path: Path, house: Path) -> None:
    (house / WHEEL).chmod(0o4777)
    out = render_into(tmp_path, house)
    copied = linked(out) / WHEEL
    assert copied.stat().st_mode & 0o7777 == 0o644
    assert not os.path.samefile(copied, house / WHEEL)
    assert (house / WHEEL).stat().st_mode & 0o7777 == 0o4777  # the wheelhouse is not touched


def test_a_wheel_of_0644_or_less_is_a_hard_link(tmp_path: Path, house: Path) -> None:
    (house / WHEEL).chmod(0o600)
    out = render_into(tmp_path, house)
    assert os.path.samefile(linked(out) / WHEEL, house / WHEEL)


def test_a_digest_cache_of_other_shapes_is_ignored(tmp_path: Path, house: Path) -> None:
    cache = tmp_path / "cache" / "rocm-image-factory" / "wheel-sha256.json"
    cache.parent.mkdir(parents=True)
    st = (house / WHEEL).stat()
    key = f"{(house / WHEEL).resolve()}|{st.st_size}|{st.st_mtime_ns}"
    for value in (1, [1], {"a": 1}, "not a digest", "$(touch /tmp/x)"):
        cache.write_text(json.dumps({key: value}))
        wheel_sha256s.cache_clear()
        assert len(wheelhouse_digest(house)) == 64
    cache.write_text("[1, 2]")
    wheel_sha256s.cache_clear()
    assert len(wheelhouse_digest(house)) == 64
