"""Recorded hosts (tests/data/sysfs) and the matrix `builder which` is asked about, for tests/which and tests/cli."""

from __future__ import annotations

from tests.fakes.checkout import DATA

HOSTS = DATA / "sysfs"

# Per-family TheRock images for three families (TheRock 7.14, which builds torch 2.12 of these two) plus
# pytorch.org's all-targets image (its two ROCm lines, 7.2 and 7.1), two torch releases, two OSes, both flavors;
# cpu for the newest torch. The compatibility rules drop therock on 7.2/7.1 and pytorch.org on 7.14.
MATRIX = """\
image: pytorch
matrix:
  os: [ubuntu-24.04, ubuntu-22.04]
  platform: [rocm7.2, rocm7.1, rocm7.14, cpu]
  torch: ["2.13.0", "2.12.0"]
  gfx: [all, gfx94X-dcgpu, gfx110X-all, gfx1151]
  channel: [pytorch, therock]
  flavor: [runtime, devel]
exclude:
  - {channel: pytorch, gfx: [gfx94X-dcgpu, gfx110X-all, gfx1151]}
  - {platform: cpu, channel: therock}
  - {platform: cpu, torch: "2.12.0"}
"""
RUN = "docker run -it --device=/dev/kfd --device=/dev/dri --group-add video"
SECCOMP = "--security-opt seccomp=unconfined"
LOCAL = "rocm-image-factory/pytorch:"
