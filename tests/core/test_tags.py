"""builder.core.tags: the readable tag of a cell, and the tag the matrix expansion gives it."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.tags import readable_tag
from testkit.matrices import expand_text


@pytest.mark.parametrize(("platform", "os_name", "python", "torch", "gfx", "flavor", "channel", "tag"), [
    ("cpu", "debian-12", "3.11", "2.13.0", None, "runtime", "pytorch", "cpu_debian12_py3.11_torch2.13.0_runtime"),
    ("cpu", "debian-13", "3.13", "2.10", None, "devel", "pytorch", "cpu_debian13_py3.13_torch2.10_devel"),
    # TheRock's cells carry TheRock's own ROCm line (7.14, never pytorch.org's 7.1/7.2): its torch 2.12 wheels.
    ("rocm7.14", "ubuntu-24.04", "3.12", "2.12.0", "gfx94X-dcgpu", "devel", "therock",
     "rocm7.14_ubuntu24.04_py3.12_torch2.12.0_gfx94X-dcgpu_therock_devel"),
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.13.0", "gfx94X-dcgpu", "runtime", "pytorch",
     "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_runtime"),
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.13.0", "gfx94X-dcgpu", "runtime", "local",
     "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_gfx94X-dcgpu_local_runtime"),
    ("rocm6.2.4", "ubuntu-22.04", "3.10", "2.6.0", "gfx90X-dcgpu", "runtime", "pytorch",
     "rocm6.2.4_ubuntu22.04_py3.10_torch2.6.0_gfx90X-dcgpu_runtime"),
    ("rocm7.2", "ubuntu-24.04", "3.12", "2.13.0", "all", "runtime", "pytorch",
     "rocm7.2_ubuntu24.04_py3.12_torch2.13.0_all_runtime"),
])
def test_tags_are_readable(tmp_path: Path, platform: str, os_name: str, python: str, torch: str,
                           gfx: str | None, flavor: str, channel: str, tag: str) -> None:
    assert readable_tag(platform, os_name, python, torch, gfx, flavor, channel) == tag
    gfx_axis = f"[{gfx}]" if gfx else "[]"
    expansion = expand_text(tmp_path, f"""\
        matrix:
          os: [{os_name}]
          platform: [{platform}]
          torch: ["{torch}"]
          gfx: {gfx_axis}
          flavor: [{flavor}]
          channel: [{channel}]
        """)
    [cell] = expansion.cells
    assert expansion.dropped == []
    assert cell.tag == tag and cell.python == python and cell.channel == channel
