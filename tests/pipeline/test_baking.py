"""builder.pipeline.baking: the bake gets only BakeOptions (the registry it publishes to is none of its business),
exports straight into the engine only from the engine's own BuildKit, and renders jobs together only when it must.
The bake itself against a real BuildKit: tests/pipeline/test_lifecycle.py, tests/e2e."""

from __future__ import annotations

from pathlib import Path

import pytest

from builder.buildkit.bake import BuildResult
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Cache, Export
from builder.matrix.expand import expand_matrix
from builder.matrix.selection import plan_images
from builder.pipeline import baking, jobs
from builder.pipeline.options import BakeOptions
from builder.render.sources import INDEX
from testkit.matrices import write_matrix
from tests.pipeline.test_lifecycle import TWO_FAMILIES


def test_the_bake_exports_with_its_own_options_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[Export, BuildKit]] = []

    def bake_into(todo: list[jobs.Job], source: object, events: object, export: Export,
                  kit: BuildKit) -> dict[str, BuildResult]:
        seen.append((export, kit))
        return {}

    monkeypatch.setattr(baking, "bake_into", bake_into)
    cache, kit = Cache("127.0.0.1:5000/ns/buildcache", write=False), BuildKit(name="b1")
    baking.bake_jobs([], BakeOptions(compression="zstd", cache=cache, buildkit=kit), baking.QUIET)
    [(export, used)] = seen
    assert (export.compression, export.cache, export.load, used) == ("zstd", cache, True, kit)


def test_only_the_engine_s_own_buildkit_exports_straight_into_it(tmp_path: Path) -> None:
    export = Export(tmp_path)
    for kit in (BuildKit(name="b1", driver="docker"), BuildKit(driver="docker-container"),
                BuildKit(driver="docker", context="other")):
        assert baking.straight(export, kit) is export
    kept = Export(tmp_path, load=False)  # builder reproduce: the images stay in the layout
    assert baking.straight(kept, BuildKit(driver="docker")) is kept


def test_jobs_rendered_in_one_go_are_baked_from_that_render_and_others_rendered_again(tmp_path: Path) -> None:
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    assert baking.together(todo, INDEX) == [j.rendered for j in todo]
    apart = [jobs.Job.of(p, INDEX) for p in plan_images(expand_matrix(write_matrix(tmp_path, TWO_FAMILIES)).cells)]
    together = baking.together(apart, INDEX)
    assert [r.cell.tag for r in together] == [j.tag for j in apart]
    assert len({r.dockerfile for r in together if r.group == together[0].group}) == 1  # one Dockerfile per group


def test_the_shared_stages_need_the_registry_cache() -> None:
    with pytest.raises(AssertionError, match="registry cache"):
        baking.shared_stages([], BakeOptions(), lambda target, line: None)
