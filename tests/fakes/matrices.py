"""Matrix texts that many tests start from, written once.

The one-cell CPU matrix (debian-12, cpu, torch 2.13.0, runtime) is the smallest valid matrix: tests append axes,
excludes, includes or an error to it. Its four lines are always lines 1-4, so an error a test appends is on
line 5 on.
"""

from __future__ import annotations

BARE_TORCH = "{version: '2.13.0', torchvision: null, torchaudio: null}"  # torch alone: one wheel in a wheelhouse


def cpu_matrix(*torch: str, image: str | None = None) -> str:
    """A CPU matrix on debian-12 up to its torch axis (items as YAML flow text, '2.13.0' when none is given),
    with an image line first when image is given; more axes, excludes and includes may follow."""
    head = f"image: {image}\n" if image else ""
    items = ", ".join(torch) if torch else "'2.13.0'"
    return f"{head}matrix:\n  os: [debian-12]\n  platform: [cpu]\n  torch: [{items}]\n"


ONE_CPU = cpu_matrix()  # the one-cell CPU matrix


# three TheRock families of one combination (TheRock 7.14, torch 2.12), runtime and devel: six images
FAMILIES = ("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.14]\n  torch: ['2.12.0']\n  channel: [therock]\n"
            "  gfx: [gfx94X-dcgpu, gfx1151, gfx110X-all]\n  flavor: [runtime, devel]\n")
