"""`builder render` from the command line (the tree itself: tests/render/)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fakes.checkout import builder_cli


def test_render_writes_one_target_per_image_not_per_tag(tmp_path: Path) -> None:
    m = tmp_path / "m.yaml"
    m.write_text("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.2]\n  torch: ['2.13.0']\n"
                 "  gfx: [all, gfx94X-dcgpu, gfx120X-all]\n")
    proc = builder_cli("render", "--matrix", str(m), "--out", str(tmp_path / "images"))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "images").iterdir() if p.is_dir()) == [
        "cells", "rif", "rocm7.2_ubuntu24.04_py3.12_torch2.13.0"]
    bake = json.loads((tmp_path / "images" / "docker-bake.json").read_text())
    assert list(bake["target"]) == ["rocm7-2_ubuntu24-04_py3-12_torch2-13-0_all_runtime"]
