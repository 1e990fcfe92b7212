"""build --push, push and publish run one lifecycle: a failing validation blocks the push in every one of them;
the bake takes the render the jobs came with."""

from __future__ import annotations

import json
import os
import re
from dataclasses import FrozenInstanceError, replace
from pathlib import Path
from typing import cast

import docker
import pytest

from builder.buildkit.bake import BuildResult, BuildxUnavailable
from builder.buildkit.export import Cache
from builder.core.spec import CellSpec
from builder.matrix.expand import expand_matrix
from builder.matrix.selection import plan_images
from builder.pipeline import jobs, lifecycle, steps
from builder.pipeline.options import BakeOptions
from builder.publish.record import Built, Promoted
from builder.registry.client import RegistryClient
from builder.render import dockerfile
from builder.render.dockerfile import RenderedCell
from builder.render.sources import INDEX, WheelSource
from testkit.matrices import write_matrix
from tests.fakes.checkout import DATA, builder_cli

BROKEN = "cpu_debian12_py3.11_torch2.13.0_broken"  # promises torch 2.12.0, installs 2.13.0


def commands(namespace: str, wheelhouse: Path, report: Path) -> dict[str, list[str]]:
    matrix = ["--matrix", str(DATA / "e2e.yaml"), "--cell", BROKEN, "--wheelhouse", str(wheelhouse)]
    return {
        "build": ["build", *matrix, "--push", "--registry", namespace, "--report", str(report), "--quiet"],
        "push": ["push", f"rocm-image-factory/pytorch:{BROKEN}", "--registry", namespace, "--report", str(report)],
        "publish": ["publish", *matrix, "--registry", namespace, "--record", str(report)],
    }


@pytest.mark.docker
@pytest.mark.registry
@pytest.mark.parametrize("command", ["build", "push", "publish"])
def test_a_failing_validation_blocks_the_push(command: str, namespace: str, base_image: str, wheelhouse: Path,
                                              tmp_path: Path, docker_client: docker.DockerClient) -> None:
    report = tmp_path / "record.json"
    if command == "push":  # the image to push must exist: build it without pushing
        built = builder_cli(*commands(namespace, wheelhouse, report)["build"][:7], "--no-validate", "--quiet")
        assert built.returncode == 0, built.stdout + built.stderr
    proc = builder_cli(*commands(namespace, wheelhouse, report)[command])
    assert proc.returncode == 1, proc.stdout + proc.stderr
    [row] = json.loads(report.read_text())["images"]
    assert (row["tag"], row["state"], row["failed_stage"], row["pushed"]) == (BROKEN, "failed", "validate", False)
    assert {c["name"] for c in row["validation"] if c["status"] == "fail"} >= {"torch_version"}
    assert "==> validate" in proc.stdout and "==> push" not in proc.stdout
    address, ns = namespace.split("/", 1)
    assert RegistryClient(address).tags(f"{ns}/pytorch") == []


@pytest.mark.docker
@pytest.mark.registry
def test_every_command_goes_through_run_image(monkeypatch: pytest.MonkeyPatch, namespace: str, base_image: str,
                                              wheelhouse: Path, tmp_path: Path) -> None:
    """Structural: the CLI commands reach images only through pipeline.run_image (spied in-process)."""
    from typer.testing import CliRunner

    from builder.cli.app import app

    report = tmp_path / "r.json"
    argv = commands(namespace, wheelhouse, report)
    built = builder_cli(*argv["build"][:7], "--no-validate", "--quiet")  # `push` needs the image to exist
    assert built.returncode == 0, built.stdout + built.stderr
    calls: list[str] = []

    def spy(client: object, job: jobs.Job, *args: object, **kwargs: object) -> object:
        calls.append(job.tag)
        return replace(lifecycle.planned(job), state="failed", failed_stage="validate", failure="validation")

    monkeypatch.setattr(lifecycle, "run_image", spy)
    runner = CliRunner()
    for name, args in [*argv.items(), ("test", ["test", f"rocm-image-factory/pytorch:{BROKEN}"])]:
        calls.clear()
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (name, result.output)
        assert calls == [BROKEN], name


NO_ENGINE = cast(docker.DockerClient, None)  # prepare asks the engine only when it skips what is published
TWO_FAMILIES = ("matrix:\n  os: [ubuntu-24.04]\n  platform: [rocm7.14]\n  torch: ['2.12.0']\n  channel: [therock]\n"
                "  gfx: [gfx94X-dcgpu, gfx1151]\n  flavor: [runtime, devel]\n")


@pytest.fixture
def no_engine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The bake stage without BuildKit: buildx is "there" and every bake succeeds; what each bake was asked for."""
    baked: list[list[str]] = []

    def bake(bake_file: Path, targets: list[str], *args: object, **kwargs: object) -> dict[str, BuildResult]:
        assert bake_file.is_file()
        baked.append(list(targets))
        return {t: BuildResult(t, True, f"sha256:{t}") for t in targets}

    monkeypatch.setattr("builder.pipeline.baking.require_buildx", lambda: "github.com/docker/buildx v0.13.1")
    monkeypatch.setattr("builder.pipeline.baking.require_builder", lambda kit: kit)  # see test_builders.py
    monkeypatch.setattr("builder.pipeline.baking.bake", bake)
    # The preflight asks the engine for the bases (tests/buildkit/test_preflight.py): here every input is there.
    monkeypatch.setattr("builder.pipeline.baking.require_inputs", lambda jobs, source, kit: None)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the run's build tree
    return baked


def counting(monkeypatch: pytest.MonkeyPatch, *where: str) -> list[list[str]]:
    """Every render_images call made through the named modules, as the tags it rendered."""
    calls: list[list[str]] = []

    def render_images(images: list[CellSpec], source: WheelSource = INDEX) -> list[RenderedCell]:
        calls.append([c.tag for c in images])
        return dockerfile.render_images(images, source)

    for module in where:
        monkeypatch.setattr(f"{module}.render_images", render_images)
    return calls


@pytest.mark.parametrize(("cache", "bakes"), [(None, 1), (Cache("127.0.0.1:5000/ns/buildcache"), 3),
                                              (Cache("127.0.0.1:5000/ns/buildcache", write=False), 1)],
                         ids=["no cache", "cache written", "cache read only"])
def test_a_devel_bakes_after_its_runtime_when_both_would_export_the_same_layers(
        cache: Cache | None, bakes: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        no_engine: list[list[str]]) -> None:
    """Two targets of one bake that export a registry cache each upload the blobs they share (no lock here: no
    step runs on the context, so without a cache export every target is baked at once)."""
    monkeypatch.setattr("builder.pipeline.stagewave.with_stages", lambda cache, rendered: cache)
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    lifecycle.prepare(NO_ENGINE, todo, BakeOptions(cache=cache))
    assert len(no_engine) == bakes
    when = {t: i for i, baked in enumerate(no_engine) for t in baked}
    for job in todo:
        if job.rendered is not None and job.rendered.cell.flavor == "devel":
            runtime = next(j for j in todo if j.tag == job.tag.replace("_devel", "_runtime"))
            assert runtime.rendered is not None
            assert (when[job.rendered.target] > when[runtime.rendered.target]) is (bakes > 1)


def test_a_run_renders_its_images_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      no_engine: list[list[str]]) -> None:
    calls = counting(monkeypatch, "builder.pipeline.jobs", "builder.pipeline.baking")
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    assert len(todo) == 4 and len(calls) == 1
    prepared = lifecycle.prepare(NO_ENGINE, todo, BakeOptions())
    assert len(calls) == 1, f"the images were rendered again: {calls}"
    assert {t for wave in no_engine for t in wave} == {j.rendered.target for j in todo if j.rendered}
    assert all(prepared.built[j.tag].ok for j in todo)
    # Some of the images (the others published, say): baked from the same render, still not rendered again.
    lifecycle.prepare(NO_ENGINE, todo[1:3], BakeOptions())
    assert len(calls) == 1, f"the images were rendered again: {calls}"


def test_jobs_rendered_apart_are_rendered_together_for_the_bake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                no_engine: list[list[str]]) -> None:
    """One Dockerfile per combination holds all of its images: renders made one image at a time cannot share it."""
    plans = plan_images(expand_matrix(write_matrix(tmp_path, TWO_FAMILIES)).cells)
    apart = [jobs.Job.of(p, INDEX) for p in plans]
    calls = counting(monkeypatch, "builder.pipeline.baking")
    prepared = lifecycle.prepare(NO_ENGINE, apart, BakeOptions())
    assert calls == [[j.tag for j in apart]]
    assert all(prepared.built[j.tag].ok for j in apart)


def test_without_buildx_a_build_stops_before_any_bake_saying_how_to_get_it(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The builder preflight's `docker buildx inspect` fails first; only then is buildx itself asked for."""
    script = tmp_path / "bin" / "docker"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho \"docker: 'buildx' is not a docker command.\" >&2\nexit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}:{os.environ['PATH']}")
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    with pytest.raises(BuildxUnavailable, match=re.escape("scripts/setup.sh")):
        lifecycle.prepare(NO_ENGINE, todo, BakeOptions())


def test_an_interrupted_run_records_what_lifecycle_assembled_so_far(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The record is frozen and made anew per step result: the interrupt handler (run_and_record's `finally`) writes
    the image as far as it got (built, never validated), and the image never reached as not-attempted."""
    def interrupted(*args: object) -> object:
        raise KeyboardInterrupt

    monkeypatch.setattr(steps, "take_build", lambda client, job, built: Built(image_id="sha256:1", image_bytes=5))
    monkeypatch.setattr(steps, "validate", interrupted)
    todo = [jobs.Job(tag=t, repository="pytorch", tags=[t], content_hash="sha256:" + "a" * 64, expect={}, labels=None,
                     local_image=f"sha256:{t}") for t in ("one", "two")]
    path = tmp_path / "record.json"
    with pytest.raises(KeyboardInterrupt):
        lifecycle.run_and_record(NO_ENGINE, todo, lifecycle.Options(), lifecycle.Events(), path, None)
    data = json.loads(path.read_text())
    assert data["complete"] is False
    assert [(i["tag"], i["state"], i["image_id"]) for i in data["images"]] == [
        ("one", "built", "sha256:1"), ("two", "not-attempted", None)]


def test_a_record_is_frozen_and_a_failed_move_is_never_recorded_as_moved() -> None:
    job = jobs.Job(tag="t", repository="pytorch", tags=["t", "latest"], content_hash="sha256:" + "a" * 64, expect={},
                   labels=None)
    report = lifecycle.planned(job)
    with pytest.raises(FrozenInstanceError):
        report.state = "published"  # type: ignore[misc]
    promoted = Promoted(digest="sha256:" + "b" * 64, compressed_bytes=10, moved=("t",), failure="denied")
    after = lifecycle.assemble(lifecycle.assemble(report, Built(image_id="sha256:1")), promoted)
    assert (after.state, after.failed_stage, after.failure, after.moved) == ("failed", "push", "push: denied", ("t",))
    assert report.state == "planned" and report.moved == ()
