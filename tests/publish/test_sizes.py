"""Sizes before a build: each image's parts from the locks or the cited data, installed bytes, a row's peak disk,
and the runner's disk as the command line gives it."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from builder.core.channels import CHANNELS
from builder.core.errors import InputError
from builder.publish import sizes
from builder.render import lockfile
from builder.render.dockerfile import RenderedCell, render_all
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps
from tests.fakes.matrices import FAMILIES, ONE_CPU, load_cells

GIB = 1 << 30


def rendered(tmp_path: Path, text: str) -> list[RenderedCell]:
    return render_all(load_cells(tmp_path, text))


@pytest.mark.parametrize(("text", "size"), [("60G", 60 * GIB), ("10T", 10 << 40), ("512M", 512 << 20),
                                            ("14GiB", 14 * GIB), ("1000", 1000), ("8K", 8192), (" 2G ", 2 * GIB)])
def test_a_size_is_bytes_or_a_whole_number_of_binary_units(text: str, size: int) -> None:
    assert sizes.parse_size(text) == size


@pytest.mark.parametrize("text", ["", "G", "0", "0G", "1.5G", "-1G", "60P", "60 G", "6O", "\u0661\u0662G", "9" * 17,
                                  "60Gi"])
def test_anything_else_is_bad_input_naming_the_option(text: str) -> None:
    with pytest.raises(InputError, match="--runner-disk"):
        sizes.parse_size(text)


def test_the_data_has_a_torch_figure_for_every_channel_and_parses_strictly() -> None:
    data = sizes.data()
    assert set(CHANNELS) <= set(data.torch) and set(CHANNELS) <= set(data.devel)
    assert data.installed_per_compressed > 1


def test_a_family_image_is_its_base_torch_and_device_packages_and_devel_adds_its_layer(tmp_path: Path) -> None:
    images = rendered(tmp_path, FAMILIES)
    runtime = next(r for r in images if r.cell.flavor == "runtime" and len(r.cell.gfx_targets) > 1)
    devel = next(r for r in images if r.cell.flavor == "devel" and r.cell.gfx == runtime.cell.gfx)
    one, two = sizes.estimate(runtime), sizes.estimate(devel)
    data = sizes.data()
    device = one.parts[("device", runtime.group, str(runtime.cell.gfx))]
    assert device == data.device_per_target["therock"] * len(runtime.cell.gfx_targets)
    assert set(two.parts) == set(one.parts) | {("devel", devel.group, str(devel.cell.gfx))}
    assert one.installed == int(one.compressed * data.installed_per_compressed)
    # A row stores what its images share once: runtime and devel of one family peak as the devel image alone.
    assert sizes.peak_of([one, two]) == two.peak == int((two.compressed + two.installed) * sizes.PEAK_FACTOR)
    other = next(r for r in images if r.cell.gfx != runtime.cell.gfx)
    both = sizes.peak_of([one, sizes.estimate(other)])
    assert one.peak < both < one.peak + sizes.estimate(other).peak  # the base and torch stage counted once


def test_a_cpu_image_has_no_device_part(tmp_path: Path) -> None:
    (image,) = rendered(tmp_path, ONE_CPU)
    assert [p[0] for p in sizes.estimate(image).parts] == ["base", "torch"]


def test_sizes_recorded_in_the_locks_stand_in_for_the_data(tmp_path: Path) -> None:
    (image,) = rendered(tmp_path, ONE_CPU)
    tree = tmp_path / "tree"
    for step in lock_steps([image.cell]):
        path = lockfile.lock_path(tree, image.group, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        if step.file == lockfile.BASE_FILE:
            path.write_text(lockfile.base_text(step, "debian:12@sha256:" + "c" * 64, size=111))
        else:
            path.write_text(lockfile.pip_text(step, [lockfile.Pin(step.file.removesuffix(".txt"), "1.0", "a" * 64,
                                                                   1000)]))
    locked = dataclasses.replace(image, source=WheelSource(locks=tree))
    parts = sizes.estimate(locked).parts
    assert parts[("base", image.group)] == 111 and parts[("torch", image.group)] == 2000
    assert sizes.estimate(image).parts[("torch", image.group)] == sizes.data().torch["pytorch"]["cpu"]
