"""Shared stages: named by what they are made of, found across combinations, baked alone into the cache."""

from __future__ import annotations

from pathlib import Path

from builder.matrix.expand import load_matrix
from builder.render import sharedstages
from builder.render.contenthash import stage_chains
from builder.render.dockerfile import render_images
from builder.render.sources import WheelSource
from testkit.matrices import cpu_matrix

ROOT = Path(__file__).resolve().parents[2]


def test_the_production_tree_shares_one_os_base_per_os_among_its_combinations() -> None:
    rendered = render_images(load_matrix(ROOT / "matrix.yaml"), WheelSource())
    shared = sharedstages.shared(rendered)
    combinations = {r.group for r in rendered}
    assert {s.stage for s in shared} == {"base"}
    assert len(shared) == len({r.cell.os for r in rendered})  # one Python and user per OS in matrix.yaml
    assert sum(len(s.groups) for s in shared) == len(combinations)  # every combination is built on one of them
    for s in shared:
        assert s.key.startswith("stage-") and len(s.key) == len("stage-") + sharedstages.KEY_HEX
        assert s.group == s.groups[0] and len(set(s.groups)) == len(s.groups) > 1


def test_a_key_is_the_stage_and_its_parents_instructions_not_their_names_or_comments() -> None:
    a = "FROM debian:12 AS base\nRUN apt-get update\nFROM base AS torch\nRUN pip install torch\n"
    b = "# another combination\nFROM debian:12 AS os\n# apt\nRUN apt-get update\nFROM os AS t\nRUN pip install torch\n"
    c = a.replace("pip install torch", "pip install torch==2.13.0")
    key = sharedstages.key_of
    assert key(stage_chains(a)["torch"].text) == key(stage_chains(b)["t"].text)
    assert key(stage_chains(a)["base"].text) == key(stage_chains(c)["base"].text)
    assert key(stage_chains(a)["torch"].text) != key(stage_chains(c)["torch"].text)
    assert key(stage_chains(a)["torch"].text) != key(stage_chains(a.replace("debian:12", "debian:13"))["torch"].text)


def test_stages_of_one_combination_only_are_not_shared(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(cpu_matrix("{version: '2.13.0', torchvision: null, torchaudio: null}")
                   + "  flavor: [runtime, devel]\n")
    rendered = render_images(load_matrix(one), WheelSource())
    assert len({r.group for r in rendered}) == 1
    assert sharedstages.shared(rendered) == []  # one bake already builds them once
    two = tmp_path / "two.yaml"
    two.write_text(cpu_matrix("{version: '2.13.0', torchvision: null, torchaudio: null}",
                              "{version: '2.12.1', torchvision: null, torchaudio: null}"))
    rendered = render_images(load_matrix(two), WheelSource())
    [base] = sharedstages.shared(rendered)
    assert (base.stage, len(base.groups)) == ("base", 2)
    keys = [sharedstages.stage_keys(r) for r in rendered]
    assert keys[0]["base"] == keys[1]["base"] == base.key
    assert list(keys[0]) == list(stage_chains(rendered[0].dockerfile)[rendered[0].stage].names)  # base first


def test_the_stage_bake_file_builds_each_shared_stage_alone_into_the_cache(tmp_path: Path) -> None:
    two = tmp_path / "two.yaml"
    two.write_text(cpu_matrix("{version: '2.13.0', torchvision: null, torchaudio: null}",
                              "{version: '2.12.1', torchvision: null, torchaudio: null}", image="img"))
    rendered = render_images(load_matrix(two), WheelSource())
    shared = sharedstages.shared(rendered)
    definition = sharedstages.bake_definition(shared, "/ctx")
    [(name, target)] = definition["target"].items()
    assert name == shared[0].key and definition["group"]["default"]["targets"] == [name]
    assert target == {"context": "/ctx", "dockerfile": f"{shared[0].group}/Dockerfile", "target": "base",
                      "output": ["type=cacheonly"]}
    assert sharedstages.chains(rendered, shared) == {name: [(name, False)]}


def test_images_that_differ_only_in_their_user_share_every_stage_below_their_own_step(tmp_path: Path) -> None:
    torch = "{version: '2.13.0', torchvision: null, torchaudio: null}"
    two = tmp_path / "users.yaml"
    two.write_text(cpu_matrix(torch) + "include:\n"
                   f"  - {{os: debian-12, platform: cpu, torch: {torch}, flavor: runtime, user: ml, tag: as-ml}}\n")
    rendered = render_images(load_matrix(two), WheelSource())
    assert len({r.group for r in rendered}) == 2  # a Dockerfile per user
    assert {(s.stage, len(s.groups)) for s in sharedstages.shared(rendered)} == {("base", 2), ("torch", 2)}
    root, ml = (stage_chains(r.dockerfile)[r.stage].text.splitlines() for r in rendered)
    # The image's own steps differ from its last RUN on (cell.json and the user), never below it.
    last = max(i for i, line in enumerate(root) if line.startswith("RUN "))
    assert root[:last] == ml[:last] and root != ml
    assert not any("useradd" in line for line in root)
    assert any("useradd" in line and " ml" in line for line in ml[last:])


def test_a_combination_split_across_rows_shares_its_torch_stage_between_them(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(cpu_matrix("{version: '2.13.0', torchvision: null, torchaudio: null}")
                   + "  flavor: [runtime, devel]\n")
    rendered = render_images(load_matrix(one), WheelSource())
    assert sharedstages.shared(rendered, {r.cell.tag: "row-1" for r in rendered}) == []  # one row: one bake
    split = {r.cell.tag: f"row-{r.cell.flavor}" for r in rendered}
    found = {s.stage for s in sharedstages.shared(rendered, split)}
    assert {"base", "torch"} <= found
