"""`builder render` owns only what it wrote: .git, notes and anything else in the output folder survive."""

from __future__ import annotations

import json
import os
import queue
import threading
from pathlib import Path

import pytest

from builder.buildkit.builders import CURRENT, BuildKit
from builder.render import contenthash, imagetree
from builder.render.dockerfile import render_all
from builder.render.sources import WheelSource, pinned_wheels, step_wheels
from testkit.matrices import ONE_CPU, load_cells
from tests.fakes.checkout import ROOT, builder_cli

ONE = ONE_CPU
TWO = ONE + "  flavor: [runtime, devel]\n"
OTHER = "matrix:\n  os: [ubuntu-24.04]\n  platform: [cpu]\n  torch: ['2.13.0']\n"
GROUP, DEVEL = "cpu_debian12_py3.11_torch2.13.0", "cells/cpu_debian12_py3.11_torch2.13.0_devel/cell.json"


def test_rendering_the_production_matrix_into_a_checkout_leaves_git_and_notes_untouched(tmp_path: Path) -> None:
    out = tmp_path / "checkout"
    (out / ".git" / "objects").mkdir(parents=True)
    (out / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (out / "notes").mkdir()
    (out / "notes" / "todo.md").write_text("mine")
    proc = builder_cli("render", "--matrix", str(ROOT / "matrix.yaml"), "--out", str(out), "--prune")
    assert proc.returncode == 0, proc.stderr
    assert (out / ".git" / "HEAD").read_text() == "ref: refs/heads/main\n" and (out / ".git" / "objects").is_dir()
    assert (out / "notes" / "todo.md").read_text() == "mine"
    files = json.loads((out / imagetree.MANIFEST).read_text())["files"]
    assert sum(f.startswith("cells/") for f in files) == 214 and sum(f.endswith("/Dockerfile") for f in files) == 37


def test_only_files_written_before_are_pruned_and_folders_only_when_emptied(tmp_path: Path) -> None:
    out = tmp_path / "images"
    two = render_all(load_cells(tmp_path, TWO))
    imagetree.write(out, two, prune=True)
    (out / GROUP / "README.md").write_text("a maintainer's note")  # not the factory's
    (out / "hand-made").mkdir()
    (out / "hand-made" / "Dockerfile").write_text("FROM scratch\n")
    other = render_all(load_cells(tmp_path, OTHER))
    imagetree.write(out, other, prune=False)
    assert (out / GROUP / "Dockerfile").is_file() and (out / DEVEL).is_file()  # kept without --prune, still ours
    problems = imagetree.drift(out, other)
    assert f"{out / GROUP / 'Dockerfile'}: no cell of the matrix renders here" in problems
    assert f"{out / imagetree.MANIFEST}: does not list exactly the rendered files" in problems
    imagetree.write(out, other, prune=True)
    assert not (out / GROUP / "Dockerfile").exists() and (out / GROUP / "README.md").is_file()
    assert not (out / DEVEL).exists() and (out / "cells").is_dir()  # other cells' files still there
    assert (out / "hand-made" / "Dockerfile").is_file() and (out / "cpu_ubuntu24.04_py3.12_torch2.13.0").is_dir()
    assert imagetree.drift(out, other) == []


def test_a_manifest_naming_paths_outside_is_ignored(tmp_path: Path) -> None:
    out = tmp_path / "images"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "Dockerfile").write_text("keep")
    out.mkdir()
    (out / "link").symlink_to(victim)  # a folder replaced by a link leads nowhere
    for listed in ({"folders": ["../victim", "/etc", "..", ".git", "link"]},
                   {"files": ["../victim/Dockerfile", "/etc/passwd", "..", ".git/HEAD", "link/Dockerfile"]}):
        (out / imagetree.MANIFEST).write_text(json.dumps(listed))
        imagetree.write(out, render_all(load_cells(tmp_path, ONE)), prune=True)
        assert (victim / "Dockerfile").read_text() == "keep"
    (out / "link").unlink()
    (out / GROUP).rename(out / "moved")
    (out / GROUP).symlink_to(victim)  # the tree's own folder is a link now: nothing is written through it
    with pytest.raises(imagetree.TreeError, match="leads out of"):
        imagetree.write(out, render_all(load_cells(tmp_path, ONE)), prune=True)
    assert (victim / "Dockerfile").read_text() == "keep"


def test_another_matrix_is_not_rendered_into_the_production_images_folder(tmp_path: Path) -> None:
    other = tmp_path / "other.yaml"
    other.write_text(ONE)
    before = sorted(p.name for p in (ROOT / "images").iterdir())
    proc = builder_cli("render", "--matrix", str(other))
    assert proc.returncode == 2 and "pass --out DIR" in proc.stderr
    assert sorted(p.name for p in (ROOT / "images").iterdir()) == before


def test_out_that_is_a_file_is_a_clear_error(tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(ONE)
    target = tmp_path / "file"
    target.write_text("x")
    for out in (target, Path("/dev/null")):
        proc = builder_cli("render", "--matrix", str(matrix), "--out", str(out))
        assert proc.returncode == 2, proc.stderr
        assert "is not a directory" in proc.stderr and "Traceback" not in proc.stderr
    assert target.read_text() == "x"


def one_wheel_house(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, WheelSource]:
    """A wheelhouse of one torch wheel, its run trees under tmp_path's own cache folder."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    house = tmp_path / "wh"
    house.mkdir()
    (house / "torch-2.13.0-py3-none-any.whl").write_bytes(b"torch")
    return house, WheelSource(house)


def test_a_run_tree_stays_in_place_but_lets_go_of_the_wheelhouse(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """One folder per wheel source (BuildKit re-sends only what changed), and no wheel kept alive after the run."""
    house, source = one_wheel_house(tmp_path, monkeypatch)
    with imagetree.run_tree(source, CURRENT.identity()) as tree:
        [rendered] = render_all(load_cells(tmp_path, ONE), source)
        imagetree.write(tree, [rendered], prune=True, source=source)
        assert (tree / pinned_wheels(rendered.pins) / "torch-2.13.0-py3-none-any.whl").stat().st_nlink == 2
    with imagetree.run_tree(source, CURRENT.identity()) as again:
        assert again == tree and (tree / imagetree.BAKE_FILE).is_file()
    assert list((tree / "wheels").iterdir()) == [] and (house / "torch-2.13.0-py3-none-any.whl").stat().st_nlink == 1
    with imagetree.run_tree(WheelSource(), CURRENT.identity()) as index_tree:
        assert index_tree != tree


def test_runs_on_two_engines_at_once_never_wait_for_each_other_and_runs_on_one_engine_take_turns(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run holds its tree for its whole bake (minutes of torch): a run on another engine with the same
    wheelhouse gets a tree of its own at once (the suite's two engine workers waited on each other's bakes), a
    second run on the same engine waits its turn."""
    _, source = one_wheel_house(tmp_path, monkeypatch)
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/engine-1.sock")
    first_engine = BuildKit().identity()
    monkeypatch.setenv("DOCKER_HOST", "unix:///run/engine-2.sock")
    second_engine = BuildKit().identity()
    assert len({first_engine, second_engine, BuildKit(name="remote").identity()}) == 3
    entered: queue.Queue[Path] = queue.Queue()

    def run(builder: str) -> None:
        with imagetree.run_tree(source, builder) as tree:
            entered.put(tree)

    with imagetree.run_tree(source, first_engine) as held:
        other = threading.Thread(target=run, args=(second_engine,))
        other.start()
        assert entered.get(timeout=30) != held  # in while the first engine's run still holds its tree
        other.join()
        same = threading.Thread(target=run, args=(first_engine,))
        same.start()
        with pytest.raises(queue.Empty):
            entered.get(timeout=0.5)  # waits: the tree is held (flock; released only below)
    same.join(timeout=30)
    assert entered.get_nowait() == held


def test_a_locked_run_leaves_no_folder_that_changes_the_next_unlocked_run_s_wheels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folders a locked run linked its steps' wheels into (sources.step_wheels) go with their links, so the
    next unlocked run's folder of wheels/ is the only one, holding exactly the wheels it linked. A folder holding
    anything else stays, and so does its file."""
    house, source = one_wheel_house(tmp_path, monkeypatch)
    with imagetree.run_tree(source, CURRENT.identity()) as tree:
        step = tree / step_wheels("torch==2.13.0 --hash=sha256:00\n")  # a locked step's folder, as _link_wheels makes
        (step / "deep").mkdir(parents=True)
        os.link(house / "torch-2.13.0-py3-none-any.whl", step / "torch-2.13.0-py3-none-any.whl")
        (tree / "wheels" / "kept").mkdir()
        (tree / "wheels" / "kept" / "notes.txt").write_text("not a wheel")
    assert sorted(p.name for p in (tree / "wheels").iterdir()) == ["kept"]
    assert (tree / "wheels" / "kept" / "notes.txt").read_text() == "not a wheel"
    (tree / "wheels" / "kept" / "notes.txt").unlink()  # emptied since: the next run starts without it
    with imagetree.run_tree(source, CURRENT.identity()) as again:
        [rendered] = render_all(load_cells(tmp_path, ONE), source)
        imagetree.write(again, [rendered], prune=True, source=source)
        assert sorted(str(p.relative_to(again)) for p in (again / "wheels").rglob("*") if not p.is_dir()) == [
            f"{pinned_wheels(rendered.pins)}/torch-2.13.0-py3-none-any.whl"]
    assert list((tree / "wheels").iterdir()) == []


def test_each_combination_mounts_every_wheel_but_other_versions_of_what_it_pins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A wheel for another combination's torch (here 2.12.0) is linked into that combination's folder only: the
    2.13.0 image's Dockerfile, its folder's wheels (the bind mount BuildKit checksums) and its content hash stay
    as they were, so its pip steps stay cached. A wheel it can install (a new numpy) changes all three."""
    house, source = one_wheel_house(tmp_path, monkeypatch)
    (house / "numpy-2.4.6-py3-none-any.whl").write_bytes(b"numpy")

    def render_and_link() -> tuple[str, str, list[str]]:
        contenthash.wheel_sha256s.cache_clear()  # a run reads its wheelhouse once; here each render is a run
        with imagetree.run_tree(source, CURRENT.identity()) as tree:
            [rendered] = render_all(load_cells(tmp_path, ONE), source)
            imagetree.write(tree, [rendered], prune=True, source=source)
            linked = sorted(p.name for p in (tree / pinned_wheels(rendered.pins)).iterdir())
            return rendered.dockerfile, rendered.content_hash, linked

    before = render_and_link()
    assert before[2] == ["numpy-2.4.6-py3-none-any.whl", "torch-2.13.0-py3-none-any.whl"]
    (house / "torch-2.12.0-py3-none-any.whl").write_bytes(b"older torch")
    assert render_and_link() == before
    (house / "numpy-2.4.7-py3-none-any.whl").write_bytes(b"newer numpy")
    after = render_and_link()
    assert after[0] == before[0] and after[1] != before[1]
    assert after[2] == [*before[2][:1], "numpy-2.4.7-py3-none-any.whl", *before[2][1:]]
