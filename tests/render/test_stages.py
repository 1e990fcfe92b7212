"""builder.render.stages: a combination's runtime and devel stages, their names, and the steps its locks pin."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.core.spec import CellSpec
from builder.render import stages
from testkit.matrices import ONE_CPU, load_cells


def cells(tmp_path: Path, text: str) -> list[CellSpec]:
    return load_cells(tmp_path, text)


def test_a_readable_tag_names_its_stage_by_flavor_and_family_a_custom_tag_by_itself(tmp_path: Path) -> None:
    [cpu] = cells(tmp_path, ONE_CPU)
    assert stages.stage_name(cpu) == "runtime"
    include = "include:\n  - {os: debian-12, platform: cpu, torch: '2.13.0', tag: My-Img}\n"
    [own] = cells(tmp_path, ONE_CPU + include)[1:]
    assert stages.stage_name(own) == "tag-my-img"


def test_a_devel_image_alone_brings_its_runtime_parent_as_a_stage(tmp_path: Path) -> None:
    [devel] = cells(tmp_path, ONE_CPU + "  flavor: [devel]\n")
    runtimes, develops = stages.stages_of([devel])
    assert list(runtimes) == ["runtime"] and list(develops) == ["devel"]
    assert develops["devel"].parent == "runtime" and runtimes["runtime"].cell.flavor == "runtime"
    parent = stages.runtime_parent(devel)
    assert (parent.flavor, parent.tag) == ("runtime", devel.tag.replace("_devel", "_runtime"))


def test_a_runtime_image_of_that_name_that_differs_gets_a_stage_of_its_own(tmp_path: Path) -> None:
    runtime, devel = cells(tmp_path, ONE_CPU + "  flavor: [runtime, devel]\n")
    other = runtime.model_copy(update={"user": "someone"})  # the same name, other layers
    runtimes, develops = stages.stages_of([other, devel])
    assert develops["devel"].parent == "devel-runtime" and set(runtimes) == {"runtime", "devel-runtime"}
    assert stages.stages_of([runtime, devel])[1]["devel"].parent == "runtime"  # the same layers: shared


def test_tags_that_differ_in_case_only_share_a_stage_name_and_are_refused(tmp_path: Path) -> None:
    includes = "".join(f"  - {{os: debian-12, platform: cpu, torch: '2.13.0', tag: {t}}}\n" for t in ("Case", "case"))
    members = cells(tmp_path, ONE_CPU + "include:\n" + includes)[1:]
    with pytest.raises(stages.NameClash, match="would share the Dockerfile stage 'tag-case'"):
        stages.stages_of(members)


def test_lock_steps_start_with_the_base_and_torch_and_follow_the_build_order(tmp_path: Path) -> None:
    members = cells(tmp_path, ONE_CPU + "  flavor: [runtime, devel]\n")
    steps = stages.lock_steps(members)
    assert [s.file for s in steps][:4] == ["base.txt", "torch.txt", "torch-deps.txt", "runtime.txt"]
    assert steps[0].wants == (members[0].os_release.base,)
    by_file = {s.file: s for s in steps}
    assert by_file["torch.txt"].no_deps and by_file["torch-deps.txt"].after == ("torch.txt",)
    assert by_file["runtime.txt"].after == ("torch.txt", "torch-deps.txt")
    assert by_file["runtime.txt"].wants[0] == f"torch=={members[0].torch_wheel}"
