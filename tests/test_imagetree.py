"""`builder render` owns only what it wrote: .git, notes and anything else in the output folder survive."""

from __future__ import annotations

import json
from pathlib import Path

from builder import imagetree
from builder.render import render_all
from tests.conftest import ROOT, builder_cli, load_cells

ONE = "matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: ['2.13.0']\n"
TWO = ONE + "  flavor: [runtime, devel]\n"
RUNTIME, DEVEL = "cpu_debian12_py3.11_torch2.13.0_runtime", "cpu_debian12_py3.11_torch2.13.0_devel"


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
    assert len(json.loads((out / imagetree.MANIFEST).read_text())["folders"]) == 258


def test_only_folders_written_before_are_pruned_and_only_their_dockerfile(tmp_path: Path) -> None:
    out = tmp_path / "images"
    two = render_all(load_cells(tmp_path, TWO))
    imagetree.write(out, two, prune=True)
    (out / DEVEL / "README.md").write_text("a maintainer's note")  # not the factory's
    (out / "hand-made").mkdir()
    (out / "hand-made" / "Dockerfile").write_text("FROM scratch\n")
    one = render_all(load_cells(tmp_path, ONE))
    imagetree.write(out, one, prune=False)
    assert (out / DEVEL / "Dockerfile").is_file()  # kept without --prune, still listed as ours
    assert imagetree.drift(out, one) == [f"{out / DEVEL}: no cell of the matrix renders here",
                                         f"{out / imagetree.MANIFEST}: does not list exactly the rendered folders"]
    imagetree.write(out, one, prune=True)
    assert not (out / DEVEL / "Dockerfile").exists() and (out / DEVEL / "README.md").is_file()
    assert (out / "hand-made" / "Dockerfile").is_file() and (out / RUNTIME / "Dockerfile").is_file()
    assert imagetree.drift(out, one) == []


def test_a_manifest_naming_paths_outside_is_ignored(tmp_path: Path) -> None:
    out = tmp_path / "images"
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "Dockerfile").write_text("keep")
    out.mkdir()
    (out / imagetree.MANIFEST).write_text(json.dumps({"folders": ["../victim", "/etc", "..", ".git"]}))
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
