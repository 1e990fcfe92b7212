"""Bake order: no two targets baked together build the same step on the build context (BuildKit would run it
once per target, racing, and two images that should share a layer would each get their own)."""

from __future__ import annotations

from pathlib import Path

from builder.buildkit.bake import Stage, waves
from builder.render.contenthash import runs_on_context
from builder.render.dockerfile import RenderedCell, render_images
from builder.render.sources import WheelSource
from testkit.matrices import load_cells

FAMILIES = ("matrix:\n  os: [ubuntu-24.04, debian-12]\n  platform: [rocm7.14]\n  torch: ['2.12.0']\n"
            "  channel: [therock]\n  gfx: [gfx94X-dcgpu, gfx1151, gfx110X-all]\n  flavor: [runtime, devel]\n")


def _chains(rendered: list[RenderedCell]) -> dict[str, list[Stage]]:
    return {r.target: r.chain for r in rendered}


def _check(plan: list[list[str]], chains: dict[str, list[Stage]]) -> None:
    """Every target once; within a wave, a racy stage not built by an earlier wave is built by one target."""
    assert sorted(t for wave in plan for t in wave) == sorted(chains)
    built: set[str] = set()
    for wave in plan:
        owners: dict[str, str] = {}
        for target in wave:
            for stage, racy in chains[target]:
                if racy and stage not in built:
                    assert owners.setdefault(stage, target) == target, (stage, owners[stage], target)
        built |= {s for t in wave for s, _ in chains[t]}


def test_a_step_on_the_context_is_a_race_a_copy_alone_is_not() -> None:
    assert runs_on_context("RUN --mount=type=cache,id=p,target=/tmp \\\n"
                           "    --mount=type=bind,source=wheels,target=/mnt \\\n    pip install torch")
    assert runs_on_context("COPY rif/x /opt/x\nRUN apt-get install -y gcc")
    assert not runs_on_context("RUN pip install torch\nCOPY rif/x /opt/x\nUSER root")
    # the factory's own files come in from their folders, like a COPY: racy only for a RUN after them
    assert not runs_on_context("RUN --mount=type=bind,source=rif,target=/mnt install /mnt/x /opt/x\n"
                               "RUN --mount=type=bind,source=cells/a_runtime,target=/mnt install /mnt/c /opt/c")
    assert runs_on_context("RUN --mount=type=bind,source=cells/a_runtime,target=/mnt install /mnt/c /opt/c\n"
                           "RUN apt-get install -y gcc")
    assert runs_on_context("RUN --mount=type=bind,source=cells/a/b,target=/mnt true")
    assert not runs_on_context("COPY --from=base /a /b\nRUN true\n"
                               "RUN --mount=type=bind,from=base,source=/a,target=/b true")


def test_families_over_a_wheelhouse_wait_for_one_torch_and_devels_for_their_runtime(tmp_path: Path) -> None:
    rendered = render_images(load_cells(tmp_path, FAMILIES), WheelSource(wheelhouse=tmp_path))
    chains = _chains(rendered)
    plan = waves(chains)
    _check(plan, chains)
    first = [by_tag_of(rendered, t) for t in plan[0]]
    assert sorted(r.group for r in first) == sorted({r.group for r in rendered})  # one leader per combination
    assert all(r.cell.flavor == "runtime" for r in first)
    _devels_after_their_runtimes(plan, rendered)
    assert len(plan) == 3  # the leaders; the other families and the leaders' devels; the other devels


def _devels_after_their_runtimes(plan: list[list[str]], rendered: list[RenderedCell]) -> None:
    position = {t: i for i, wave in enumerate(plan) for t in wave}
    by_tag = {r.cell.tag: r for r in rendered}
    for r in rendered:
        if r.cell.flavor == "devel":
            runtime = by_tag[r.cell.tag.replace("_devel", "_runtime")]
            assert position[r.target] > position[runtime.target], r.cell.tag


def by_tag_of(rendered: list[RenderedCell], target: str) -> RenderedCell:
    return next(r for r in rendered if r.target == target)


def test_an_index_build_without_locks_bakes_everything_at_once(tmp_path: Path) -> None:
    """Its pip steps read nothing from the context: one vertex for all targets, shared by BuildKit itself."""
    rendered = render_images(load_cells(tmp_path, FAMILIES))
    assert waves(_chains(rendered)) == [sorted((r.target for r in rendered),
                                               key=lambda t: (len(_chains(rendered)[t]), t))]


def test_stages_that_touch_no_context_never_hold_a_target_back() -> None:
    chains = {"a": [("g/base", False), ("g/torch", True), ("g/a", True)],
              "b": [("g/base", False), ("g/torch", True), ("g/b", True)],
              "c": [("h/base", False), ("h/c", True)],
              "d": [("g/base", False), ("g/d", False)]}
    assert waves(chains) == [["c", "d", "a"], ["b"]]
    _check(waves(chains), chains)


def test_with_a_registry_cache_exported_no_two_targets_of_a_wave_build_one_stage(tmp_path: Path) -> None:
    """Each target's cache export uploads its chain's layers: two of one wave would both upload a new blob."""
    rendered = render_images(load_cells(tmp_path, FAMILIES))  # an index build: no stage runs on the context
    chains = _chains(rendered)
    assert len(waves(chains)) == 1
    plan = waves(chains, exported=True)
    _check(plan, {t: [(stage, True) for stage, _ in chain] for t, chain in chains.items()})
    _devels_after_their_runtimes(plan, rendered)
    assert len(plan) == 3  # one runtime per combination builds its torch; the other runtimes; the devels
