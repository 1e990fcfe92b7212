"""Sizes from locks that record only some of theirs (issue 53, "Plans and rows"): a part is taken from the locks
only when every lock file it is made of records every wheel's size; a lock with one pin of unknown size records
none, and the part falls back to the cited data, never to a partial sum that would under-estimate the runner."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from builder.core import channels
from builder.core.errors import InputError
from builder.publish import rows, sizes
from builder.publish.runners import Runner
from builder.render import lockfile
from builder.render.bakefile import group_of
from builder.render.dockerfile import RenderedCell, render_all
from builder.render.sources import WheelSource
from builder.render.stages import lock_steps
from testkit.matrices import FAMILIES, ONE_CPU, load_cells

SHA = "a" * 64


def locked(tmp_path: Path, sized: dict[str, list[int | None]]) -> tuple[RenderedCell, RenderedCell]:
    """The one-cell CPU image, and the same rendered from a lock tree whose pip locks pin wheels of these sizes
    (None: a wheel whose index gave no size); the base records 111 bytes."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    (image,) = render_all(load_cells(tmp_path, ONE_CPU))
    tree = tmp_path / "tree"
    for step in lock_steps([image.cell]):
        path = lockfile.lock_path(tree, image.group, step)
        path.parent.mkdir(parents=True, exist_ok=True)
        if step.file == lockfile.BASE_FILE:
            path.write_text(lockfile.base_text(step, "debian:12@sha256:" + "c" * 64, size=111))
            continue
        pins = [lockfile.Pin(f"p{i}", "1.0", SHA, size) for i, size in enumerate(sized.get(step.file, [1000]))]
        path.write_text(lockfile.pip_text(step, pins))
    return image, dataclasses.replace(image, source=WheelSource(locks=tree))


def test_a_lock_with_one_wheel_of_unknown_size_records_none() -> None:
    step = lockfile.Step("torch-deps.txt", ("numpy",), "3.11")
    assert lockfile.recorded_size(lockfile.pip_text(step, [lockfile.Pin("a", "1", SHA, 300),
                                                           lockfile.Pin("b", "1", SHA, 700)])) == 1000
    assert lockfile.recorded_size(lockfile.pip_text(step, [lockfile.Pin("a", "1", SHA, 300),
                                                           lockfile.Pin("b", "1", SHA, None)])) == 0
    assert lockfile.recorded_size(lockfile.pip_text(step, [])) == 0


def test_torch_is_summed_from_its_two_locks_only_when_both_record_their_sizes(tmp_path: Path) -> None:
    plain, whole = locked(tmp_path / "a", {"torch.txt": [3000], "torch-deps.txt": [500, 250]})
    assert sizes.estimate(whole).parts[("torch", whole.group)].compressed == 3750
    plain, partial = locked(tmp_path / "b", {"torch.txt": [3000], "torch-deps.txt": [500, None]})
    figure = channels.of("pytorch").SIZES.torch["cpu"]
    assert figure not in (3000, 3500)
    assert sizes.estimate(partial).parts[("torch", partial.group)].compressed == figure
    assert sizes.estimate(plain).parts[("torch", plain.group)].compressed == figure
    assert sizes.estimate(partial).parts[("base", partial.group)].compressed == 111  # the base's own record stands


def test_sizes_are_said_in_gib_with_one_decimal() -> None:
    """How a plan error says a peak and a runner's disk (builder.publish.rows): binary GiB, one decimal."""
    assert [sizes.gib(n) for n in (0, 1 << 30, 48 << 30, 26_275_584_000, (1 << 40) + (1 << 29))] == [
        "0.0 GiB", "1.0 GiB", "48.0 GiB", "24.5 GiB", "1024.5 GiB"]


def test_an_image_over_every_runner_is_named_with_its_peak_and_the_largest_disk_in_gib(tmp_path: Path) -> None:
    members = render_all(load_cells(tmp_path, FAMILIES))
    with pytest.raises(InputError) as caught:
        rows.split(group_of(members[0]), members, Runner("small", 20 << 30))
    text = str(caught.value)
    assert "_gfx110X-all_therock_devel (and 3 more of " in text  # the largest named, the others counted
    assert "alone needs 34.0 GiB of disk at its peak (estimated)" in text
    assert "(the largest: small, 20.0 GiB): it needs a larger runner, one with at least 35G free" in text
