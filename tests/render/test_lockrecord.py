"""builder.render.lockrecord: the lock an image was built from, recorded with it, and read back as hostile data."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from builder.core import ospins
from builder.core.spec import CellSpec
from builder.render import lockfile, lockrecord, oslock
from builder.render.dockerfile import render_all
from builder.render.lockfile import Pin, Step
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps
from testkit.matrices import load_cells

SNAP = "20261101T000000Z"
MATRIX = "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: ['2.14.1']\n  flavor: [runtime, devel]\n"
DEB = "a" * 64


def os_lock(os: str, wants: tuple[str, ...], packages: int = 2) -> str:
    source = ospins.Source(f"http://127.0.0.1:9/{SNAP}/", "bookworm", ("main",))
    pins = tuple(ospins.Package(f"pkg{n}", "amd64", f"1.{n}-1", DEB) for n in range(packages))
    return ospins.OsLock(os, wants, SNAP, (source,), pins, trusted=True).text()


def good_files() -> dict[str, str]:
    base = lockfile.base_text(Step("base.txt", ("debian:12",)), "mirror.example/debian:12@sha256:" + "b" * 64,
                              snapshot=SNAP)
    torch = lockfile.pip_text(Step("torch.txt", ("torch==2.14.1",), "3.11", no_deps=True),
                              [Pin("torch", "2.14.1", "c" * 64)])
    runtime = lockfile.pip_text(Step("tag-cpu_debian12_py3.11_torch2.14.1_x.txt", ("numpy",), "3.11"),
                                [Pin("numpy", "2.4.6", "d" * 64), Pin("filelock", "3.20.0", "e" * 64)])
    return {"base.txt": base, "torch.txt": torch, "tag-cpu_debian12_py3.11_torch2.14.1_x.txt": runtime,
            "os-base.txt": os_lock("debian-12", ("python3", "ca-certificates"), 3)}


def blob(files: object, **extra: object) -> tuple[bytes, str]:
    body = json.dumps({"schemaVersion": 1, "files": files, **extra}).encode()
    return body, "sha256:" + hashlib.sha256(body).hexdigest()


def refused(body: bytes, digest: str) -> str:
    with pytest.raises(lockrecord.RecordError) as caught:
        lockrecord.parse(body, digest, "reg/ns/pytorch: its lock record")
    return str(caught.value)


def test_a_record_reads_back_as_written_and_says_what_it_pins(tmp_path: Path) -> None:
    recorded = lockrecord.Recorded(good_files())
    body = recorded.body
    assert lockrecord.parse(body, "sha256:" + hashlib.sha256(body).hexdigest(), "x") == recorded
    assert (recorded.snapshot, recorded.base_snapshot, recorded.wheels, recorded.os_packages) == (SNAP, SNAP, 3, 3)
    assert recorded.summary() == f"OS snapshot {SNAP}, base made from snapshot {SNAP}, 3 wheels, 3 OS packages"
    assert recorded.annotations() == {"org.rocm-image-factory.lock.snapshot": SNAP,
                                      "org.rocm-image-factory.lock.base-snapshot": SNAP,
                                      "org.rocm-image-factory.lock.wheels": "3",
                                      "org.rocm-image-factory.lock.os-packages": "3"}
    recorded.write(tmp_path, "cpu_debian12_py3.11_torch2.14.1")
    assert {p.name: p.read_text() for p in (tmp_path / "cpu_debian12_py3.11_torch2.14.1" / "lock").iterdir()} \
        == good_files()


def test_an_oversized_record_is_refused_before_it_is_parsed() -> None:
    body, digest = blob({"base.txt": "x" * lockrecord.MAX_BYTES})
    assert "over the" in refused(body, digest)


def test_bytes_that_are_not_the_listed_digest_are_refused() -> None:
    body, _ = blob(good_files())
    assert "its bytes are not" in refused(body, "sha256:" + "0" * 64)


@pytest.mark.parametrize("name", ["../base.txt", "lock/torch.txt", "/etc/passwd.txt", ".hidden.txt", "torch.sh",
                                  "a..b.txt", "Torch.txt", "os-evil.txt", "torch.txt\n", "x" * 300 + ".txt", ""])
def test_a_file_name_no_lock_has_is_refused(name: str) -> None:
    files = good_files()
    files[name] = files["torch.txt"]
    body, digest = blob(files)
    said = refused(body, digest)
    assert "is no lock file's name" in said or "files" in said, said


def test_an_sdk_steps_os_lock_is_read_and_counted_as_os_packages_not_wheels() -> None:
    files = good_files()
    amd = ospins.Source("https://repo.radeon.com/rocm/apt/7.2.1/", "noble", ("main",), "/etc/apt/keyrings/rocm.gpg")
    sdk = ospins.OsLock("ubuntu-24.04", ("curl", "gnupg", "rocm-hip-sdk"), SNAP, (amd,),
                        (ospins.Package("rocm-hip-sdk", "amd64", "7.2.1.70201-81~24.04", ""),))
    recorded = lockrecord.Recorded({**files, oslock.SDK_STEP: sdk.text()})
    body = recorded.body
    assert lockrecord.parse(body, "sha256:" + hashlib.sha256(body).hexdigest(), "x") == recorded
    assert (recorded.wheels, recorded.os_packages) == (3, 4)
    body, digest = blob({**files, oslock.SDK_STEP: sdk.text().replace("signed-by=/etc", "signed-by=etc")})
    assert oslock.SDK_STEP in refused(body, digest)


@pytest.mark.parametrize(("name", "change"), [
    ("torch.txt", lambda t: t + "--extra-index-url http://evil.example/simple\n"),  # an option pip would take
    ("torch.txt", lambda t: t.replace("    --hash=sha256:", "    --hash=md5:")),
    ("base.txt", lambda t: t + "evil.example/debian:12@sha256:" + "f" * 64 + "\n"),  # a second base
    ("base.txt", lambda t: t.replace(f"snapshot: {SNAP}", "snapshot: tomorrow")),
    ("os-base.txt", lambda t: t.replace("pin: pkg0:amd64=1.0-1", "pin: pkg0:amd64 1.0-1")),
    ("os-base.txt", lambda t: t.replace("# rif-os-lock 1", "# rif-os-lock 9")),
])
def test_a_file_out_of_its_grammar_is_refused(name: str, change: object) -> None:
    files = good_files()
    assert callable(change)
    files[name] = change(files[name])
    body, digest = blob(files)
    assert name in refused(body, digest)


@pytest.mark.parametrize(("files", "extra"), [
    ({"torch.txt": good_files()["torch.txt"]}, {}),  # no base.txt
    (["base.txt"], {}),
    ({"base.txt": 5}, {}),
    (good_files(), {"schemaVersion": 2}),
    (good_files(), {"command": "rm -rf /"}),
    ({f"f{n}.txt": "" for n in range(lockrecord.MAX_FILES + 1)}, {}),
    ({**good_files(), "torch.txt": "#" * (lockrecord.MAX_FILE_CHARS + 1)}, {}),
])
def test_a_document_of_another_shape_is_refused(files: object, extra: dict[str, object]) -> None:
    body, digest = blob(files, **extra)
    assert refused(body, digest).startswith("reg/ns/pytorch: its lock record")
    assert refused(b"\xff not json", "sha256:" + hashlib.sha256(b"\xff not json").hexdigest())


def write_all_locks(tree: Path, cells: list[CellSpec]) -> None:
    groups: dict[str, list[CellSpec]] = {}
    for r in render_all(cells):
        groups.setdefault(r.group, []).append(r.cell)
    for group, members in groups.items():
        folder = tree / group / "lock"
        folder.mkdir(parents=True)
        for step in lock_steps(members):
            (folder / step.file).write_text(lockfile.base_text(step, "debian:12@sha256:" + "0" * 64)
                                            if step.file == lockfile.BASE_FILE else lockfile.pip_text(step, []))
        for os_step in oslock.steps(members):
            (folder / os_step.file).write_text(os_lock(members[0].os, os_step.wants))


def test_a_locked_render_records_each_image_s_own_locks_and_an_unlocked_one_none(tmp_path: Path) -> None:
    cells, tree = load_cells(tmp_path, MATRIX), tmp_path / "tree"
    write_all_locks(tree, cells)
    by_flavor = {r.cell.flavor: r for r in render_all(cells, WheelSource(locks=tree))}
    on_disk = {p.name: p.read_text() for p in tree.glob("*/lock/*.txt")}
    runtime, devel = by_flavor["runtime"].lock_files, by_flavor["devel"].lock_files
    assert set(runtime) == {"base.txt", "torch.txt", "torch-deps.txt", "runtime.txt", "os-base.txt"}
    assert set(devel) == set(runtime) | {"os-devel.txt"}  # its toolchain's OS lock too, no sibling's
    assert all(text == on_disk[name] for name, text in devel.items())
    assert all(r.lock_files == {} for r in render_all(cells))
