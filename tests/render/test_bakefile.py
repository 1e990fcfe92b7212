"""builder.render.bakefile: one bake target per image, one group per combination, names bake allows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from builder.core.tags import HASH_LABEL
from builder.render import bakefile
from builder.render.dockerfile import render_all
from testkit.matrices import FAMILIES, ONE_CPU, load_cells


def test_bake_file_has_a_target_per_image_and_a_group_per_combination(tmp_path: Path) -> None:
    rendered = render_all(load_cells(tmp_path, FAMILIES))
    bake = bakefile.definition(rendered, "images")
    assert sorted(bake["target"]) == sorted(r.target for r in rendered) and len(rendered) == 6
    for r in rendered:
        target = bake["target"][r.target]
        assert (target["dockerfile"], target["target"]) == (f"{r.group}/Dockerfile", r.stage)
        assert target["labels"][HASH_LABEL] == r.content_hash
        assert f"rocm-image-factory/pytorch:{r.cell.tag}" in target["tags"]
        assert all(re.fullmatch(r"[A-Za-z0-9_-]+", name) for name in [r.target, *bake["group"]])
    assert bake["group"]["default"]["targets"] == [r.target for r in rendered]
    [(name, group)] = [(n, g) for n, g in bake["group"].items() if n != "default"]
    assert name.startswith("combo-") and group["targets"] == [r.target for r in rendered]


def test_two_tags_that_would_share_a_target_name_are_refused(tmp_path: Path) -> None:
    includes = "".join(f"  - {{os: debian-12, platform: cpu, torch: '2.13.0', tag: {t}}}\n"
                       for t in ("my.img", "my-img"))
    rendered = render_all(load_cells(tmp_path, ONE_CPU + "include:\n" + includes))
    with pytest.raises(bakefile.BakeNameClash, match=r"'my\.img' and 'my-img' would share the bake target name"):
        bakefile.definition(rendered, "images")


def test_dumps_is_sorted_json_ending_in_a_newline() -> None:
    assert bakefile.dumps({"target": {"b": 1, "a": 2}}) == b'{\n  "target": {\n    "a": 2,\n    "b": 1\n  }\n}\n'
