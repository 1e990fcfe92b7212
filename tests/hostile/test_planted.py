"""Names planted where the factory writes (issue 31): a hard link to a file elsewhere, a FIFO or a symbolic link
at a path the factory writes is replaced as a name. The linked file keeps its bytes and its mode, and no write
waits on a FIFO (an alarm turns a hang into a failure)."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from builder import site
from builder.buildkit.builders import CURRENT
from builder.cli.progress import RunView
from builder.core import safefs
from builder.core.logfiles import logged_run
from builder.publish import record
from builder.render import contenthash, imagetree, lockfile, resolve
from builder.render.dockerfile import WheelSource, render_all
from builder.site.records import MARKER
from testkit.matrices import ONE_CPU, load_cells
from tests.fakes import hangs

KINDS = ["hard link", "FIFO", "symbolic link"]
MATRIX = ONE_CPU
VICTIM = b"keep: a file outside the folder, not the factory's\n"


class Blocked(BaseException):
    """Not an OSError (TimeoutError is one): a writer that catches OSError and goes on cannot swallow it."""


@pytest.fixture(autouse=True)
def alarm() -> Iterator[None]:
    """A write that opens a planted FIFO blocks forever: fail it instead."""
    with hangs.alarm(Blocked("a write blocked on a planted FIFO")):
        yield


class Victim:
    """A file outside the written folder, mode 0600, and what it must still be afterwards."""

    def __init__(self, folder: Path, body: bytes = VICTIM) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"victim-{len(list(folder.iterdir()))}"
        self.path.write_bytes(body)
        self.path.chmod(0o600)
        self.body = body

    def plant(self, at: Path, kind: str) -> None:
        at.parent.mkdir(parents=True, exist_ok=True)
        if at.exists() or at.is_symlink():
            at.unlink()
        {"hard link": lambda: os.link(self.path, at), "FIFO": lambda: os.mkfifo(at),
         "symbolic link": lambda: at.symlink_to(self.path)}[kind]()

    def untouched(self) -> bool:
        info = self.path.stat()
        return self.path.read_bytes() == self.body and stat.S_IMODE(info.st_mode) == 0o600


def replaced(path: Path) -> bool:
    """path is now a regular file of its own: not a link, no second name, not a FIFO."""
    info = path.lstat()
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def no_temporaries(folder: Path) -> bool:
    return not [p for p in folder.rglob(".*.new")]


@pytest.mark.parametrize("kind", KINDS)
def test_render_replaces_what_is_planted_at_every_file_it_writes(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "images"
    rendered = render_all(load_cells(tmp_path, MATRIX))
    imagetree.write(out, rendered, prune=True)
    names = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file())
    assert imagetree.BAKE_FILE in names and imagetree.MANIFEST in names and any("Dockerfile" in n for n in names)
    victims = {}
    for name in names:
        victims[name] = Victim(tmp_path / "outside")
        victims[name].plant(out / name, kind)
    imagetree.write(out, rendered, prune=True)
    assert [n for n, v in victims.items() if not v.untouched()] == []
    assert all(replaced(out / n) for n in names) and imagetree.drift(out, rendered) == []
    assert no_temporaries(out)


def test_render_never_sets_the_mode_of_a_hard_link_that_holds_the_same_bytes(tmp_path: Path) -> None:
    """The unchanged-file path sets the mode in place: on a second name of a file elsewhere it must rewrite."""
    out = tmp_path / "images"
    rendered = render_all(load_cells(tmp_path, MATRIX))
    imagetree.write(out, rendered, prune=True)
    victim = Victim(tmp_path / "outside", (out / imagetree.BAKE_FILE).read_bytes())
    victim.plant(out / imagetree.BAKE_FILE, "hard link")
    imagetree.write(out, rendered, prune=True)
    assert victim.untouched() and replaced(out / imagetree.BAKE_FILE)
    assert stat.S_IMODE((out / imagetree.BAKE_FILE).stat().st_mode) == 0o644


@pytest.mark.parametrize("kind", KINDS)
def test_lock_replaces_what_is_planted_at_its_lock_files(tmp_path: Path, kind: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolve, "pin_base", lambda ref, registry, insecure: f"{ref}@sha256:{'a' * 64}")
    monkeypatch.setattr(resolve, "resolve", lambda step, after, cell, wheelhouse: [
        lockfile.Pin(f"pkg-{step.file.removesuffix('.txt')}", "1.0", "b" * 64)])
    tree, cells = tmp_path / "images", load_cells(tmp_path, MATRIX)
    first = resolve.lock_tree(cells, tree)
    assert len(first.written) >= 2
    victims = {path: Victim(tmp_path / "outside") for path in first.written}
    for path, victim in victims.items():
        victim.plant(path, kind)
    again = resolve.lock_tree(cells, tree)
    assert sorted(again.written) == sorted(first.written)
    assert [p for p, v in victims.items() if not v.untouched()] == []
    assert all(replaced(p) for p in victims) and no_temporaries(tree)


@pytest.mark.parametrize("kind", KINDS)
def test_catalog_replaces_what_is_planted_at_its_pages_and_marker(tmp_path: Path, kind: str) -> None:
    out = tmp_path / "site"
    files = {"index.html": "<p>new</p>", "index.md": "new", "records.json": "{}"}
    site.write_site(out, files)
    planted = [*files, MARKER] if kind == "hard link" else list(files)  # another marker: --out is refused, unread
    victims = {name: Victim(tmp_path / "outside") for name in planted}
    for name, victim in victims.items():
        victim.plant(out / name, kind)
    site.write_site(out, files)
    assert [n for n, v in victims.items() if not v.untouched()] == []
    assert all(replaced(out / n) for n in victims) and (out / "index.md").read_text() == "new"
    assert no_temporaries(out)


@pytest.mark.parametrize("kind", KINDS)
def test_a_run_record_replaces_what_is_planted_at_it_and_beside_it(tmp_path: Path, kind: str) -> None:
    """The record was written to `<path>.tmp` by name and renamed: a link planted there was written through."""
    path = tmp_path / "out" / "record.json"
    at_path, beside = Victim(tmp_path / "outside"), Victim(tmp_path / "outside")
    at_path.plant(path, kind)
    beside.plant(path.with_name(path.name + ".tmp"), kind)
    record.write(path, [], "127.0.0.1:5000")
    assert at_path.untouched() and beside.untouched() and replaced(path)
    assert json.loads(path.read_text())["registry"] == "127.0.0.1:5000" and no_temporaries(path.parent)


def _logged_run(path: Path) -> None:
    logged_run([sys.executable, "-c", "print('\\x1b[1mbuilt\\x1b[0m')"], path)


def _progress(path: Path) -> None:
    view = RunView(tags=[path.stem], mode="plain", log_dir=path.parent)
    view._log(path.stem, "==> built")
    view._logs[path.stem].close()


def _lock_log(path: Path) -> None:
    os.chdir(path.parent.parent.parent)  # LOG_DIR is .rif/logs under the working folder
    resolve._log(["pip", "install"], __import__("subprocess").CompletedProcess([], 0, "built\n", ""))


def _host_network(path: Path) -> None:
    from builder.buildkit.bake import host_network
    bake = path.parent / "docker-bake.json"
    bake.write_text(json.dumps({"target": {"t": {"tags": ["t:1"]}}}))
    host_network(bake, path.parent)


def _cache(path: Path) -> None:
    contenthash.wheel_sha256s.__wrapped__(path.parent)


LOGS: dict[str, tuple[Callable[[Path], None], str]] = {
    "build log": (_logged_run, "logs/tag.log"),
    "run log": (_progress, "logs/tag.log"),
    "lock log": (_lock_log, ".rif/logs/lock.log"),
    "host-network bake file": (_host_network, "tree/docker-bake.host-network.json"),
    "wheel digest cache": (_cache, "cache/rocm-image-factory/wheel-sha256.json"),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("writer", sorted(LOGS))
def test_logs_and_caches_replace_what_is_planted_at_them(tmp_path: Path, kind: str, writer: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "work" / "cache"))
    write, name = LOGS[writer]
    path = tmp_path / "work" / name
    victim = Victim(tmp_path / "outside")
    victim.plant(path, kind)
    write(path)
    assert victim.untouched() and replaced(path) and path.stat().st_size > 0 and no_temporaries(path.parent)


def test_an_appended_log_of_its_own_keeps_its_lines(tmp_path: Path) -> None:
    path = tmp_path / "lock.log"
    for line in ("one\n", "two\n"):
        with safefs.open_log(path, append=True) as fh:
            fh.write(line)
    assert path.read_text() == "one\ntwo\n" and stat.S_IMODE(path.stat().st_mode) == 0o644


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "record.json"
    path.write_bytes(b"old")

    class Refused(Exception):
        pass

    def refuse(fd: int) -> None:
        raise Refused

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "fsync", refuse)
        with pytest.raises(Refused):
            safefs.replace_file(path, b"new")
    assert path.read_bytes() == b"old" and no_temporaries(tmp_path)


def test_the_run_lock_file_is_never_truncated_through_a_planted_hard_link(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    with imagetree.run_tree(WheelSource(), CURRENT.identity()) as images:
        lock_file = images.parent / "lock"
    victim = Victim(tmp_path / "outside")
    victim.plant(lock_file, "hard link")
    with imagetree.run_tree(WheelSource(), CURRENT.identity()):
        pass
    assert victim.untouched() and replaced(lock_file)


@pytest.mark.parametrize("kind", KINDS)
def test_a_copied_wheel_replaces_what_is_planted_at_it(tmp_path: Path, kind: str) -> None:
    """Where a wheel cannot be hard-linked into the tree it is copied: beside its name, then renamed."""
    wheel = tmp_path / "wheelhouse" / "torch-2.13.0-cp312-cp312-linux_x86_64.whl"
    wheel.parent.mkdir()
    wheel.write_bytes(b"wheel")
    os.utime(wheel, ns=(1, 2_000_000_000))
    at = tmp_path / "images" / "wheels" / wheel.name
    victim = Victim(tmp_path / "outside")
    victim.plant(at, kind)
    safefs.copy_file(wheel, at)
    assert victim.untouched() and replaced(at) and at.read_bytes() == b"wheel"
    assert at.stat().st_mtime_ns == 2_000_000_000 and no_temporaries(at.parent)
