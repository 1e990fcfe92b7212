"""Locks, without an engine: the file format, what a combination locks, locked renders, hashes and staleness."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.core.spec import CellSpec
from builder.render import lockfile
from builder.render.dockerfile import render_all
from builder.render.lockfile import LockProblem, Pin, Step
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps
from testkit.matrices import load_cells, write_matrix
from tests.fakes.checkout import builder_cli

TWO_OS = ("matrix:\n  os: [ubuntu-24.04, debian-12]\n  platform: [rocm7.14]\n  torch: ['2.12.0']\n"
          "  channel: [therock]\n  gfx: [gfx94X-dcgpu, gfx1151]\n  flavor: [runtime, devel]\n")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fake_resolution(step: Step, numpy: str) -> list[Pin]:
    """What `builder lock` would pin, made up: the same inputs always give the same pins."""
    if step.no_deps:
        return [Pin("torch", step.wants[0].split("==")[1], sha(step.wants[0]))]
    if step.file == "torch-deps.txt":
        return [Pin("filelock", "3.20.0", sha("filelock"))]
    if step.file.endswith("-device.txt"):
        return [Pin(f"rocm-{step.file}", "7.14.0", sha(step.file))]
    if step.file.startswith("devel-"):
        return [Pin("rocm-sdk-devel", "7.14.0", sha("devel"))]
    return [Pin("numpy", numpy, sha("numpy" + numpy))]


def write_locks(tree: Path, cells: list[CellSpec], numpy: str = "2.4.6",
                bases: dict[str, str] | None = None, only: str | None = None) -> None:
    groups: dict[str, list[CellSpec]] = {}
    for r in render_all(cells):
        groups.setdefault(r.group, []).append(r.cell)
    for group, members in groups.items():
        for step in lock_steps(members):
            if only is not None and step.file != only:
                continue
            path = lockfile.lock_path(tree, group, step)
            path.parent.mkdir(parents=True, exist_ok=True)
            if step.file == lockfile.BASE_FILE:
                digest = (bases or {}).get(step.wants[0], sha(step.wants[0]))
                path.write_text(lockfile.base_text(step, f"mirror.example/{step.wants[0]}@sha256:{digest}"))
            else:
                path.write_text(lockfile.pip_text(step, fake_resolution(step, numpy)))


def hashes(cells: list[CellSpec], tree: Path) -> dict[str, str]:
    return {r.cell.tag: r.content_hash for r in render_all(cells, WheelSource(locks=tree))}


def test_a_pip_lock_reads_back_its_pins_and_inputs() -> None:
    step = Step("runtime.txt", ("torch==2.13.0", "numpy"), "3.11")
    pins = [Pin("numpy", "2.4.6", "a" * 64), Pin("Jinja2", "3.1.6", "b" * 64)]
    text = lockfile.pip_text(step, pins)
    assert lockfile.inputs_of(text) == {"for": ["torch==2.13.0", "numpy"], "python": "3.11"}
    assert lockfile.pins_of(text) == sorted(pins, key=lambda p: p.name.lower())
    assert "--hash=sha256:" + "a" * 64 in text


def test_a_base_lock_holds_one_digest_pinned_reference() -> None:
    step = Step("base.txt", ("debian:12",))
    pinned = "debian:12@sha256:" + "c" * 64
    assert lockfile.pinned_base(lockfile.base_text(step, pinned)) == pinned
    with pytest.raises(ValueError, match="pinned by @sha256"):
        lockfile.pinned_base(lockfile.base_text(step, "debian:12"))


def test_a_combination_locks_base_torch_its_deps_and_each_family(tmp_path: Path) -> None:
    cells = [c for c in load_cells(tmp_path, TWO_OS) if c.os == "debian-12"]
    steps = {s.file: s for s in lock_steps(cells)}
    assert set(steps) == {"base.txt", "torch.txt", "torch-deps.txt", "runtime-gfx94x-dcgpu-device.txt",
                          "runtime-gfx94x-dcgpu.txt", "runtime-gfx1151-device.txt", "runtime-gfx1151.txt",
                          "devel-gfx94x-dcgpu.txt", "devel-gfx1151.txt"}
    assert steps["torch.txt"].no_deps and not steps["torch-deps.txt"].no_deps
    assert steps["runtime-gfx1151.txt"].after == ("torch.txt", "torch-deps.txt", "runtime-gfx1151-device.txt")
    assert steps["base.txt"].wants == ("debian:12",)
    # a devel image's ROCm SDK: the same TheRock release, over every layer of its runtime
    assert steps["devel-gfx1151.txt"].wants == ("rocm[devel]==7.14.0",)
    assert steps["devel-gfx1151.txt"].after == ("torch.txt", "torch-deps.txt", "runtime-gfx1151-device.txt",
                                                "runtime-gfx1151.txt")


def test_a_locked_render_pins_the_base_and_installs_each_lock_with_hashes(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, TWO_OS)
    write_locks(tmp_path / "tree", cells)
    for r in render_all(cells, WheelSource(locks=tmp_path / "tree")):
        assert f"FROM mirror.example/{r.cell.os_release.base}@sha256:" in r.dockerfile
        assert r.dockerfile.count("--no-deps --require-hashes --requirement /tmp/rif/requirements.txt") == 8
        assert f"{r.group}/lock/base.txt" in r.files and f"{r.group}/lock/torch.txt" in r.files


def test_a_new_base_digest_moves_exactly_the_images_on_that_base(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, TWO_OS)
    tree = tmp_path / "tree"
    write_locks(tree, cells)
    before = hashes(cells, tree)
    write_locks(tree, cells, bases={"debian:12": "d" * 64}, only="base.txt")
    after = hashes(cells, tree)
    moved = {tag for tag in before if before[tag] != after[tag]}
    assert moved == {c.tag for c in cells if c.os == "debian-12"} and moved


def test_a_new_wheel_moves_exactly_the_images_that_install_it(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, TWO_OS)
    tree = tmp_path / "tree"
    write_locks(tree, cells)
    before = hashes(cells, tree)
    [cell] = [c for c in cells if c.os == "debian-12" and c.gfx == "gfx1151" and c.flavor == "runtime"]
    [step] = [s for s in lock_steps([cell]) if s.file == "runtime-gfx1151.txt"]
    group = next(r.group for r in render_all(cells) if r.cell.tag == cell.tag)
    lockfile.lock_path(tree, group, step).write_text(lockfile.pip_text(step, [Pin("numpy", "2.4.7", "e" * 64)]))
    after = hashes(cells, tree)
    moved = {tag for tag in before if before[tag] != after[tag]}
    assert moved == {c.tag for c in cells if c.os == "debian-12" and c.gfx == "gfx1151"}  # runtime and devel


def test_unchanged_locks_give_the_same_hashes_alone_or_together(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, TWO_OS)
    tree = tmp_path / "tree"
    write_locks(tree, cells)
    together = hashes(cells, tree)
    for cell in cells[:3]:
        assert hashes([cell], tree)[cell.tag] == together[cell.tag]


def test_missing_and_stale_locks_are_named(tmp_path: Path) -> None:
    cells = load_cells(tmp_path, TWO_OS)
    tree = tmp_path / "tree"
    write_locks(tree, cells)
    group = render_all(cells)[0].group
    (tree / group / "lock" / "torch-deps.txt").unlink()
    other = render_all(cells)[-1]
    base = lockfile.lock_path(tree, other.group, lock_steps([other.cell])[0])
    base.write_text(base.read_text().replace('"debian:12"', '"debian:11"'))
    with pytest.raises(LockProblem) as caught:
        render_all(cells, WheelSource(locks=tree))
    text = "\n".join(caught.value.problems)
    assert f"{group}/lock/torch-deps.txt: missing" in text
    assert f"{other.group}/lock/base.txt: stale (resolved for debian:11; the matrix now asks for debian:12)" in text


def test_render_check_fails_on_a_missing_or_stale_lock(tmp_path: Path) -> None:
    matrix = write_matrix(tmp_path, TWO_OS)
    cells = load_cells(tmp_path, TWO_OS)
    tree = tmp_path / "tree"
    write_locks(tree, cells)
    assert builder_cli("render", "--matrix", str(matrix), "--out", str(tree)).returncode == 0
    ok = builder_cli("render", "--matrix", str(matrix), "--out", str(tree), "--check")
    assert ok.returncode == 0, ok.stdout + ok.stderr
    matrix.write_text(TWO_OS.replace("gfx1151]", "gfx1151, gfx110X-all]"))
    missing = builder_cli("render", "--matrix", str(matrix), "--out", str(tree), "--check")
    assert missing.returncode == 2 and "runtime-gfx110x-all.txt: missing" in missing.stderr
    assert "builder lock" in missing.stderr
    matrix.write_text(TWO_OS)
    lock = next(tree.glob("*/lock/runtime-gfx1151.txt"))
    lock.write_text(lock.read_text().replace('"numpy"', '"numpy<2"'))  # resolved for what the matrix no longer asks
    stale = builder_cli("render", "--matrix", str(matrix), "--out", str(tree), "--check")
    assert stale.returncode == 2 and "runtime-gfx1151.txt: stale" in stale.stderr


SNAP = "20261101T000000Z"


def test_a_base_lock_records_the_snapshot_its_base_was_made_from_and_reads_it_strictly() -> None:
    step = Step("base.txt", ("debian:12",))
    pinned = "mirror.example/debian:12@sha256:" + "c" * 64
    made = lockfile.base_text(step, pinned, snapshot=SNAP)
    assert f"\nsnapshot: {SNAP}\n" in made and lockfile.base_text(step, pinned) == made.replace(f"snapshot: {SNAP}\n",
                                                                                                 "")
    assert (lockfile.pinned_base(made), lockfile.snapshot_of(made)) == (pinned, SNAP)
    assert lockfile.snapshot_of(lockfile.base_text(step, pinned)) is None
    assert lockfile.grammar_problems(Path("base.txt"), made) == []
    for bad, said in ((made.replace(SNAP, "2026-11-01"), "is not `snapshot: <UTC timestamp"),
                      (made + f"snapshot: {SNAP}\n", "a second snapshot")):
        [problem] = lockfile.grammar_problems(Path("base.txt"), bad)
        assert said in problem.message, problem
    pip = lockfile.pip_text(Step("torch.txt", ("torch==2.13.0",), "3.11"), []) + f"snapshot: {SNAP}\n"
    assert lockfile.grammar_problems(Path("torch.txt"), pip)  # only base.txt may say it


def test_a_base_snapshot_leaves_the_render_as_it_was(tmp_path: Path) -> None:
    """The snapshot is a record of where the base came from: the digest in FROM already pins it."""
    cells = load_cells(tmp_path, TWO_OS)
    tree = tmp_path / "tree"
    write_locks(tree, cells)
    before = {r.cell.tag: (r.dockerfile, r.content_hash) for r in render_all(cells, WheelSource(locks=tree))}
    for path in tree.glob("*/lock/base.txt"):
        path.write_text(path.read_text() + f"snapshot: {SNAP}\n")
    after = {r.cell.tag: (r.dockerfile, r.content_hash) for r in render_all(cells, WheelSource(locks=tree))}
    assert after == before


def test_a_lock_records_each_wheels_size_and_the_bases_and_reads_them_back(tmp_path: Path) -> None:
    step = Step("torch.txt", ("torch==2.13.0",), "3.11", no_deps=True)
    pins = [Pin("torch", "2.13.0", "a" * 64, 4_496_300_000), Pin("filelock", "3.20.0", "b" * 64, 16_000)]
    text = lockfile.pip_text(step, pins)
    assert "--hash=sha256:" + "a" * 64 + "  # size=4496300000\n" in text
    path = tmp_path / "torch.txt"
    path.write_text(text)
    read = lockfile.read_lock(path)  # the grammar takes it
    assert lockfile.pins_of(read) == sorted(pins, key=lambda p: p.name.lower())
    assert lockfile.recorded_size(read) == 4_496_316_000
    base = tmp_path / lockfile.BASE_FILE
    base.write_text(lockfile.base_text(Step("base.txt", ("debian:12",)), "debian:12@sha256:" + "c" * 64,
                                       size=49_000_000))
    assert lockfile.recorded_size(lockfile.read_lock(base)) == 49_000_000
    assert lockfile.pinned_base(base.read_text()) == "debian:12@sha256:" + "c" * 64


def test_a_lock_without_sizes_still_parses_and_records_none(tmp_path: Path) -> None:
    path = tmp_path / "torch.txt"
    path.write_text(lockfile.pip_text(Step("torch.txt", ("torch",), "3.11"), [Pin("torch", "2.13.0", "a" * 64)]))
    assert lockfile.recorded_size(lockfile.read_lock(path)) == 0
    some = [Pin("torch", "2.13.0", "a" * 64, 10), Pin("numpy", "2.4.6", "b" * 64)]  # not every pin's size
    path.write_text(lockfile.pip_text(Step("torch.txt", ("torch",), "3.11"), some))
    assert lockfile.recorded_size(lockfile.read_lock(path)) == 0


@pytest.mark.parametrize(("name", "line"), [
    ("torch.txt", "    --hash=sha256:" + "a" * 64 + "  # size=12a"),
    ("torch.txt", "    --hash=sha256:" + "a" * 64 + " # size=12"),
    ("torch.txt", "    --hash=sha256:" + "a" * 64 + "  # size=" + "9" * 16),
    ("torch.txt", "# size=12"),
    ("base.txt", "# size=-5"),
    ("base.txt", "# size=5\n# size=6"),
])
def test_a_size_anywhere_but_where_builder_lock_writes_it_is_refused(tmp_path: Path, name: str, line: str) -> None:
    step = Step(name, ("x",), "3.11")
    if name == lockfile.BASE_FILE:
        text = lockfile.base_text(step, "debian:12@sha256:" + "c" * 64) + line + "\n"
    else:
        text = lockfile.pip_text(step, [Pin("torch", "2.13.0", "a" * 64)])
        text = text.replace("    --hash=sha256:" + "a" * 64 + "\n", line + "\n") if "--hash" in line else text + line
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(InputError):
        lockfile.read_lock(path)
