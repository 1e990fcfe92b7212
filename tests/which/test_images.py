"""builder.which.images: which cells carry a target, best first, their docker run line, and the options checked."""

from __future__ import annotations

import pytest

from builder.core.errors import InputError
from builder.core.spec import CellSpec
from builder.which import images
from testkit.matrices import load_cells
from tests.fakes.hosts import MATRIX


@pytest.fixture(scope="module")
def cells(tmp_path_factory: pytest.TempPathFactory) -> list[CellSpec]:
    return load_cells(tmp_path_factory.mktemp("which"), MATRIX)


def test_carrying_keeps_rocm_cells_with_the_target_and_ranked_puts_the_family_image_first(
        cells: list[CellSpec]) -> None:
    mine = images.carrying(cells, "gfx942")
    assert mine and all(c.rocm is not None and "gfx942" in c.gfx_targets for c in mine)
    assert not images.carrying(cells, "gfx9999")
    best = images.ranked(mine, "ubuntu-24.04")
    assert best[0].gfx == "gfx94X-dcgpu" and best[0].os == "ubuntu-24.04" and best[0].flavor == "runtime"
    all_targets = [c for c in best if c.gfx == "all"]
    assert best.index(all_targets[0]) > max(best.index(c) for c in best if c.gfx != "all")


def test_filters_keep_a_rocm_prefix_os_and_flavor(cells: list[CellSpec]) -> None:
    kept = [c for c in cells if images.Filters("7.1", "ubuntu-22.04", "devel").keeps(c)]
    assert kept and {(c.rocm, c.os, c.flavor) for c in kept} == {("7.1", "ubuntu-22.04", "devel")}
    assert not any(c.rocm == "7.14" for c in kept)  # 7.1 is a line, not a text prefix
    assert str(images.Filters("7.1", None, "devel")) == "--rocm 7.1 --flavor devel"


def test_docker_run_adds_every_group_and_asks_getent_without_one() -> None:
    assert images.docker_run("r/p:t", (44, 110), [("HSA_OVERRIDE_GFX_VERSION", "11.0.0")]) == (
        "docker run -it --device=/dev/kfd --device=/dev/dri --group-add video --group-add 44 --group-add 110 "
        "--security-opt seccomp=unconfined -e HSA_OVERRIDE_GFX_VERSION=11.0.0 r/p:t")
    assert '--group-add "$(getent group render | cut -d: -f3)"' in images.docker_run("r/p:t", (), [])


def test_image_ref_is_the_registrys_or_the_local_name(cells: list[CellSpec]) -> None:
    assert images.image_ref(cells[0], "ghcr.io/acme") == f"ghcr.io/acme/pytorch:{cells[0].tag}"
    assert images.image_ref(cells[0], None).endswith(f"/pytorch:{cells[0].tag}")


def test_hexs() -> None:
    assert images.hexs(0x744C, 4) == "0x744c" and images.hexs(None, 2) is None


@pytest.mark.parametrize(("value", "said"), [
    ("gfx94X-dcgpu", "is a family, not a target"), ("all", "'all' is not a target"),
    ("RX 7900 XTX", "is a GPU, not a target: use --gfx gfx1100"), ("nonsense", "is not a gfx target"),
])
def test_check_target_says_which_target_to_give(value: str, said: str) -> None:
    with pytest.raises(InputError, match=said):
        images.check_target(value)


def test_a_target_passes() -> None:
    assert images.check_target("gfx1100") == "gfx1100"


def test_check_filters() -> None:
    assert images.check_filters("rocm7.2", "ubuntu-24.04", "runtime") == images.Filters("7.2", "ubuntu-24.04",
                                                                                         "runtime")
    for args, option in ((("7", None, None), "--rocm"), ((None, "ubuntu-99", None), "--os"),
                         ((None, None, "slim"), "--flavor")):
        with pytest.raises(InputError) as exc:
            images.check_filters(*args)
        assert exc.value.problems[0].key == option


def test_choices_are_newest_first_and_flavors_in_their_order(cells: list[CellSpec]) -> None:
    choices = images.choices_of(images.carrying(cells, "gfx942"))  # ROCm cells, as recommend passes them
    assert choices["rocm"][:2] == ["7.14", "7.2"] and choices["torch"] == ["2.13.0", "2.12.0"]
    assert choices["flavor"] == ["runtime", "devel"]
