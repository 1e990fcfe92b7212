"""The GitHub rows: one job per combination (bake group), every image in exactly one row, every
`${{ matrix.* }}` a workflow reads in every row, and GitHub's job limit holds."""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from builder.core.errors import InputError
from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix
from builder.matrix.selection import plan_images, select, shard
from builder.pipeline.jobs import by_combination, matrix_jobs
from builder.publish import rows, runners, sizes
from builder.render.dockerfile import bake_target, group_key
from builder.render.sources import WheelSource
from tests.fakes.checkout import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
MATRIX_KEY = re.compile(r"\$\{\{\s*matrix\.([A-Za-z_][A-Za-z0-9_-]*)")
NAME = re.compile(r"[A-Za-z0-9_.-]+")  # what publish-cells.yml lets through to a command line or a file name
WHOLE = rows.Runner(disk=10 << 40)  # a budget every combination fits: one row per combination
GIB = 1 << 30


def production_cells() -> list[CellSpec]:
    return expand_matrix(ROOT / "matrix.yaml").cells


def production_rows() -> list[rows.Row]:
    return rows.rows(production_cells(), WHOLE)


def test_every_matrix_key_the_workflows_read_is_in_every_row() -> None:
    read = {key for wf in WORKFLOWS for key in MATRIX_KEY.findall(wf.read_text())}
    assert {"group", "cells", "images"} <= read, "publish-cells.yml names its job and selects its images by these"
    for row in production_rows():
        missing = read - set(row)
        assert not missing, f"{row['group']}: workflows read matrix.{sorted(missing)}"
        assert all(isinstance(v, str) for k, v in row.items() if k not in ("images", "peak_disk"))
        assert isinstance(row["images"], int) and isinstance(row["peak_disk"], int)


def test_every_image_is_in_exactly_one_row_and_selectable_by_its_tag() -> None:
    cells = production_cells()
    images = [p.content.tag for p in plan_images(cells)]
    listed = Counter(tag for row in rows.rows(cells, WHOLE) for tag in row["cells"].split())
    assert set(listed) == set(images) and len(images) == len(set(images))
    assert all(n == 1 for n in listed.values()), [t for t, n in listed.items() if n > 1]
    # What the job passes on: `builder publish --cell TAG` for each tag selects exactly that row's images.
    for row in rows.rows(cells, WHOLE):
        chosen = select(cells, row["cells"].split(), ROOT / "matrix.yaml")
        assert sorted(p.content.tag for p in plan_images(chosen)) == sorted(row["cells"].split())


def test_a_row_is_exactly_one_combination_and_its_bake_group() -> None:
    cells = production_cells()
    content = {p.content.tag: p.content for p in plan_images(cells)}
    found = rows.rows(cells, WHOLE)
    assert len(found) < len(content), "one job per combination, not per image"
    keys = []
    for row in found:
        tags = row["cells"].split()
        assert row["images"] == len(tags) >= 1
        combos = {group_key(content[t]) for t in tags}
        assert len(combos) == 1, f"{row['group']} mixes combinations"
        keys += combos
    assert len(keys) == len(set(keys)), "one combination split over several rows"
    # The same groups as the committed bake file, so a job bakes exactly one group's targets.
    bake = json.loads((ROOT / "images" / "docker-bake.json").read_text())["group"]
    assert {r["group"] for r in found} == set(bake) - {"default"}
    for row in found:
        assert sorted(bake[row["group"]]["targets"]) == sorted(bake_target(t) for t in row["cells"].split())


def test_group_names_and_tags_are_safe_for_the_job_script() -> None:
    for row in production_rows():
        assert NAME.fullmatch(row["group"]) and row["group"].startswith("combo-")
        assert all(NAME.fullmatch(t) for t in row["cells"].split(" "))


def test_rows_of_a_selection_are_its_combinations_only() -> None:
    cells = select(production_cells(), None, ROOT / "matrix.yaml", "cpu_*")
    found = rows.rows(cells, WHOLE)
    assert [r["platform"] for r in found] == ["cpu"] * len(found)
    assert sum(r["images"] for r in found) == len(plan_images(cells))


def test_the_production_matrix_fits_one_matrix_and_more_than_256_rows_are_refused() -> None:
    found = production_rows()
    assert len(found) <= rows.MAX_JOBS
    line = rows.matrix_json(found)
    assert "\n" not in line and json.loads(line) == {"include": found}
    too_many = [found[0]] * (rows.MAX_JOBS + 1)
    with pytest.raises(InputError) as exc:
        rows.matrix_json(too_many)
    assert "--shard" in str(exc.value) and "(command line)" in str(exc.value)
    assert len(json.loads(rows.matrix_json(too_many[:rows.MAX_JOBS]))["include"]) == rows.MAX_JOBS


@pytest.mark.parametrize("n", [1, 2, 3, 40, 41])
def test_shards_partition_the_rows(n: int) -> None:
    found = production_rows()
    parts = [shard(found, f"{k}/{n}") for k in range(1, n + 1)]
    groups = [r["group"] for part in parts for r in part]
    assert sorted(groups) == sorted(r["group"] for r in found) and len(groups) == len(set(groups))
    assert max(len(p) for p in parts) - min(len(p) for p in parts) <= 1, "interleaved: shards are even"


@pytest.mark.parametrize("spec", ["0/2", "3/2", "1", "a/b", "1/0", "-1/2"])
def test_bad_shard_is_a_command_line_error(spec: str) -> None:
    with pytest.raises(InputError) as exc:
        shard([], spec)
    assert "--shard" in str(exc.value)


def test_rows_are_pure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No engine, no process, no file written: the plan job only computes the rows."""
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"ghrows ran {args}")
    monkeypatch.setattr(subprocess, "run", refuse)
    monkeypatch.setattr(subprocess, "Popen", refuse)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    monkeypatch.chdir(tmp_path)
    assert production_rows()
    assert list(tmp_path.iterdir()) == []


def test_past_github_s_limit_rows_pack_interleaved_combinations_and_keep_every_image() -> None:
    from builder.publish import rows

    todo = matrix_jobs(ROOT / "matrix.yaml", None, None, WheelSource())
    groups = {name: [j.rendered for j in members if j.rendered is not None]
              for name, members in by_combination(todo).items()}
    packed = rows.build_rows(groups, limit=5, where=WHOLE)
    assert len(packed) == 5 and [r["group"] for r in packed] == [f"batch-{k}-of-5" for k in range(1, 6)]
    assert sorted(g for r in packed for g in r["groups"].split()) == sorted(groups)
    assert sorted(t for r in packed for t in r["cells"].split()) == sorted(j.tag for j in todo)
    assert all(r["images"] == len(r["cells"].split()) for r in packed)
    assert [r["group"] for r in rows.build_rows(groups, where=WHOLE)] == list(groups), (
        "one row per combination when they fit")


# -- rows packed by the runner's disk (builder.publish.sizes estimates each row's peak) -------------------------

def therock_group() -> tuple[str, list[object]]:
    groups = {name: [j.rendered for j in members if j.rendered is not None]
              for name, members in by_combination(matrix_jobs(ROOT / "matrix.yaml", None, None, WheelSource())).items()}
    name = max(groups, key=lambda g: len(groups[g]))
    return name, list(groups[name])


def test_every_row_carries_its_integer_peak_disk_and_its_runner() -> None:
    found = rows.rows(production_cells(), rows.Runner("big-runner", 10 << 40))
    assert all(isinstance(r["peak_disk"], int) and r["peak_disk"] > 0 for r in found)
    assert {r["runner"] for r in found} == {"big-runner"}
    # A row's peak is its largest wave's: a 30-image row of TheRock (families in waves) needs less than
    # pytorch.org's 2-image one (its one wave brings the whole ROCm devel stack), and more than a CPU pair.
    therock = max(r["peak_disk"] for r in found if r["images"] > 20)
    assert max(r["peak_disk"] for r in found if r["images"] == 2 and r["platform"] != "cpu") > therock
    assert therock > max(r["peak_disk"] for r in found if r["platform"] == "cpu")


def pool(**disks: int) -> runners.Pool:
    return runners.Pool(tuple(sorted((runners.Runner(k, v) for k, v in disks.items()), key=lambda r: r.disk)),
                        next(iter(disks)), Path("runners.yaml"), "runners")


def test_a_combination_that_just_fits_a_runner_is_one_row_on_the_smallest_that_holds_it() -> None:
    name, members = therock_group()
    need = rows.split(name, members, WHOLE)[0]["peak_disk"]  # type: ignore[arg-type]
    for where, label in ((pool(small=need - 1, exact=need, big=need + GIB), "exact"),
                         (pool(exact=need), "exact"), (pool(small=need - 1, big=need + GIB), "big")):
        (whole,) = rows.split(name, members, where)  # type: ignore[arg-type]
        assert (whole["runner"], whole["peak_disk"], whole["group"]) == (label, need, name)


def test_a_combination_just_over_every_runner_is_split_by_gpu_family_every_part_on_the_smallest_that_holds_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)  # where a split can help: tests/publish/test_rows_guards.py says why
    name, members = therock_group()
    whole = rows.split(name, members, WHOLE)[0]  # type: ignore[arg-type]
    budget = whole["peak_disk"] - 1
    parts = rows.split(name, members, pool(tiny=1 << 20, large=budget))  # type: ignore[arg-type]
    assert len(parts) > 1 and all(p["peak_disk"] <= budget and p["runner"] == "large" for p in parts)
    assert [p["group"] for p in parts] == [f"{name}-part{k}-of-{len(parts)}" for k in range(1, len(parts) + 1)]
    assert {p["groups"] for p in parts} == {name}, "every part names its bake group"
    tags = [t for p in parts for t in p["cells"].split()]
    assert sorted(tags) == sorted(whole["cells"].split()) and len(tags) == len(set(tags))
    for p in parts:  # a family's runtime and devel in one row
        cells = p["cells"].split()
        assert all(t.replace("_runtime", "_devel") in cells for t in cells if t.endswith("_runtime"))
    # A part that a smaller runner holds runs there.
    smaller = min(p["peak_disk"] for p in parts)
    mixed = rows.split(name, members, pool(small=smaller, large=budget))  # type: ignore[arg-type]
    assert {p["runner"] for p in mixed} == {"small", "large"}
    assert all(p["runner"] == ("small" if p["peak_disk"] <= smaller else "large") for p in mixed)


def test_an_image_over_every_runner_is_an_error_naming_it_and_the_runner_it_needs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)  # an image alone below its whole combination: test_rows_guards.py
    name, members = therock_group()
    largest = max(sizes.estimate(m).peak for m in members)  # type: ignore[arg-type]
    rows.split(name, members, pool(a=largest))  # type: ignore[arg-type]  # just fits: no error
    with pytest.raises(InputError) as caught:
        rows.split(name, members, pool(a=largest // 2, b=largest - 1))  # type: ignore[arg-type]
    text = str(caught.value)
    assert text.startswith("runners.yaml: runners:") and "alone needs" in text and "larger runner" in text
    assert f"at least {-(-largest // GIB)}G free" in text and "b, " in text
    assert any(m.cell.tag in text for m in members)  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="--runner-disk"):  # a one-runner pool from the command line
        rows.split(name, members, rows.Runner(disk=largest - 1))  # type: ignore[arg-type]


def test_a_batch_peaks_at_the_sum_of_its_rows_on_the_smallest_runner_that_holds_the_sum() -> None:
    todo = matrix_jobs(ROOT / "matrix.yaml", None, None, WheelSource())
    groups = {name: [j.rendered for j in members if j.rendered is not None]
              for name, members in by_combination(todo).items()}
    single = {r["group"]: r["peak_disk"] for r in rows.build_rows(groups, where=WHOLE)}
    packed = rows.build_rows(groups, limit=5, where=pool(one=10 << 40, two=20 << 40))
    for batch in packed:
        peaks = [single[g] for g in batch["groups"].split()]
        assert batch["peak_disk"] == sum(peaks) > max(peaks) and batch["runner"] == "one"
    most = max(b["peak_disk"] for b in packed)
    assert max(b["peak_disk"] for b in rows.build_rows(groups, limit=5, where=pool(a=most))) == most
    assert {b["runner"] for b in rows.build_rows(groups, limit=5, where=pool(a=most - 1, b=most))} <= {"a", "b"}
    with pytest.raises(InputError, match="fewer rows per job with --shard"):
        rows.build_rows(groups, limit=5, where=pool(a=most - 1))


def test_the_production_matrix_plans_on_the_repository_pool_every_combination_whole() -> None:
    found = rows.rows(production_cells(), runners.beside(ROOT / "matrix.yaml"))
    repository = runners.load(ROOT / runners.FILE)
    disks = {r.label: r.disk for r in repository.runners}
    assert all(r["group"] == r["groups"] for r in found), "no combination split: a runner of the pool holds each"
    for r in found:
        assert r["peak_disk"] <= disks[r["runner"]]
        assert repository.fitting(r["peak_disk"]) == runners.Runner(r["runner"], disks[r["runner"]]), "the smallest"
