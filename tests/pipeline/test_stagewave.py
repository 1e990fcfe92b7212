"""A publish job imports the shared stages a first wave left in the registry cache, and only those."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from builder.buildkit.export import Cache
from builder.matrix.expand import load_matrix
from builder.pipeline import stagewave
from builder.render import sharedstages
from builder.render.dockerfile import RenderedCell, render_images
from builder.render.sources import WheelSource
from testkit.matrices import cpu_matrix
from testkit.scripted_registry import FAST, MANIFEST, MANIFEST_HEADERS, Reply, Scripted, Seen, oci_error

Start = Callable[[Callable[[Seen], Reply]], Scripted]
BARE = "{version: '%s', torchvision: null, torchaudio: null}"


def two_combinations(tmp_path: Path) -> list[RenderedCell]:
    path = tmp_path / "m.yaml"
    path.write_text(cpu_matrix(BARE % "2.13.0", BARE % "2.12.1") + "  flavor: [runtime, devel]\n")
    return render_images(load_matrix(path), WheelSource())


def test_each_target_imports_the_held_stages_of_its_chain(tmp_path: Path, server: Start) -> None:
    rendered = two_combinations(tmp_path)
    [base] = sharedstages.shared(rendered)
    scripted = server(lambda seen: (200, MANIFEST_HEADERS, MANIFEST) if seen.path.endswith(f"/{base.key}")
                      else oci_error(404, "MANIFEST_UNKNOWN", "no such tag"))
    cache = stagewave.with_stages(Cache(f"{scripted.address}/ns/buildcache"), rendered, FAST)
    assert cache.stages == {r.target: (base.key,) for r in rendered}
    # One look-up per distinct stage under the images (base, torch per combination): none per image.
    images = {sharedstages.stage_keys(r)[r.stage] for r in rendered}
    distinct = {k for r in rendered for k in sharedstages.stage_keys(r).values()} - images
    assert len(distinct) == 3  # one base, two torch stages
    assert sorted(s.path for s in scripted.seen if s.method in ("HEAD", "GET")) == sorted(
        f"/v2/ns/buildcache/manifests/{k}" for k in distinct)


def test_a_stage_that_cannot_be_looked_up_is_built_by_the_job_itself(tmp_path: Path, server: Start) -> None:
    rendered = two_combinations(tmp_path)
    scripted = server(lambda seen: oci_error(500, "UNKNOWN", "storage is down"))
    cache = stagewave.with_stages(Cache(f"{scripted.address}/ns/buildcache"), rendered, FAST)
    assert cache.stages == {r.target: () for r in rendered}
    assert Cache(f"{scripted.address}/ns/buildcache").imports("t", "gzip") == cache.imports("t", "gzip")


def test_the_first_wave_counts_shared_stages_by_the_rows_it_is_given(tmp_path: Path) -> None:
    rendered = two_combinations(tmp_path)
    one_row = {r.cell.tag: "row" for r in rendered}
    # Both combinations in one row and no cache looked up: nothing for a first wave (the row's bake shares them).
    assert stagewave.build(rendered, WheelSource(), Cache("127.0.0.1:1/ns/buildcache"), "gzip", row_of=one_row) == []
    assert sharedstages.shared(rendered) != [] and sharedstages.shared(rendered, one_row) == []
