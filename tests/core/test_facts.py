"""Every gfx target and family of the data, cross-checked against AMD's rocm-bootstrap (PyPI, MIT).

rocm-bootstrap 0.3.0 (`rocm_bootstrap/targets.py`) is the target -> sub-family -> family hierarchy that TheRock's
whl-next index names its device packages by (amd-torch-device-gfx942, amd-torch-device-gfx115x,
rocm_whl_next_ownership.yaml). Its data is Python literals, so the test needs no network: the `test` extra pins it
(pyproject.toml); without it installed the module is skipped, saying so.
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import resources

import pytest
import yaml

from builder.core import facts
from builder.which import gfx_from_version

rb = pytest.importorskip("rocm_bootstrap", reason="rocm-bootstrap (the `test` extra) is not installed")
targets = pytest.importorskip("rocm_bootstrap.targets")
naming = pytest.importorskip("rocm_bootstrap.naming")
package_metadata = pytest.importorskip("rocm_bootstrap.package_metadata")


def data_targets() -> Iterator[tuple[str, str]]:
    """(where, target) for every target any data file names."""
    for name, fam in facts.gfx_families().items():
        yield from ((f"gfx.yaml {name}", t) for t in fam.targets)
    data = facts.compat()
    for minor, entry in data.torch.items():
        yield from ((f"compat.yaml torch {minor}", t) for t in entry.pytorch.gfx)
        for rocm, listed in entry.pytorch.gfx_per_rocm.items():
            yield from ((f"compat.yaml torch {minor} rocm{rocm}", t) for t in listed)
    for line, release in data.therock.items():
        for minor, excluded in release.exclude_targets.items():
            yield from ((f"compat.yaml therock {line} torch {minor}", t) for t in excluded)
    yield from (("compat.yaml therock_dev_only_targets", t) for t in data.therock_dev_only_targets)


def sub_family(target: str) -> str:
    return str(targets.bundle_for_target(target, targets.PackagingLevel.SUB_FAMILY).key)


def test_every_target_of_the_data_is_a_target_rocm_bootstrap_knows() -> None:
    known = {t.name for t in targets.ALL_TARGETS}
    unknown = [(where, t) for where, t in data_targets() if t not in known]
    assert unknown == []


def test_every_family_lies_within_one_rocm_bootstrap_sub_family() -> None:
    """TheRock's families (gfx110X-all, gfx90X-dcgpu, gfx125X-dcgpu) never straddle two sub-families, so a family
    image needs the device packages of one sub-family only."""
    straddling = {name: sorted({sub_family(t) for t in fam.targets})
                  for name, fam in facts.gfx_families().items() if len({sub_family(t) for t in fam.targets}) > 1}
    assert straddling == {}


def test_families_and_rocm_bootstrap_agree_on_the_family_of_each_target() -> None:
    """A target in several families of ours (gfx906: gfx90X-dcgpu and gfx906-dgpu) still has one rocm-bootstrap
    family (gfx9), and the data's families of one bootstrap family never mix majors."""
    for name, fam in facts.gfx_families().items():
        majors = {targets.bundle_for_target(t, targets.PackagingLevel.FAMILY).key for t in fam.targets}
        assert len(majors) == 1, name


def test_architectural_family_names_match_the_gfx125X_family() -> None:
    """rocm-bootstrap's package_metadata names gfx1250's architectural family gfx125X, as TheRock's gfx125X-dcgpu."""
    for name, fam in facts.gfx_families().items():
        for t in fam.targets:
            arch = package_metadata.architectural_family(t)
            assert arch is None or name.startswith(arch), (name, t, arch)


def test_whl_next_sub_family_packages_are_rocm_bootstrap_sub_families() -> None:
    """compat.yaml's sub-family device packages on whl-next (gfx110x, gfx115x, gfx12-0) are named as rocm-bootstrap
    names its sub-family bundles (naming.device_dist_name)."""
    names = {naming.device_dist_name("amd-torch-device", sf).removeprefix("amd-torch-device-")
             for sf in targets.ALL_SUB_FAMILIES}
    listed = set(facts.compat().whl_next_sub_families)
    assert listed and listed <= names, listed - names


def test_builder_which_names_every_target_as_rocm_bootstrap_does() -> None:
    """The sysfs gfx_target_version decoding of `builder which` and rocm-bootstrap agree on every target
    (gfx1250-strict shares gfx1250's number: the numeric lookup gives gfx1250)."""
    for t in targets.ALL_TARGETS:
        want = "gfx1250" if t.name == "gfx1250-strict" else t.name
        assert gfx_from_version(t.gfx_target_version) == want, t.name


def test_every_data_file_parses_to_what_pyyaml_s_safe_load_gives() -> None:
    """package_data parses with libyaml (ten times faster): the data must be exactly safe_load's, types included."""
    folder = resources.files("builder").joinpath("data")
    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".yaml"))
    assert len(names) >= 8
    for name in names:
        text = folder.joinpath(name).read_text(encoding="utf-8")
        fast, slow = facts.package_data(name), yaml.safe_load(text)
        assert fast == slow and repr(fast) == repr(slow), name  # repr: 2.10 stays a str, 1 an int, dates dates
