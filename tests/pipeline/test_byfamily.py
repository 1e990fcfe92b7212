"""`publish --by-family`: one GPU family at a time; the previous family's images leave the engine (and BuildKit's cache
of them) only once this family's are baked and loaded."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from builder.buildkit import records
from builder.buildkit.bake import BuildResult
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Cache
from builder.pipeline import byfamily, jobs, lifecycle
from builder.pipeline.options import BakeOptions
from builder.publish.record import ImageReport
from builder.render.sources import INDEX, PIP_CACHE_ID
from testkit.matrices import write_matrix
from tests.pipeline.test_lifecycle import TWO_FAMILIES, no_engine  # noqa: F401 - the fixture


class _Images:
    """An engine's images: records what is removed, and when (into the shared event list)."""

    def __init__(self, events: list[str]) -> None:
        self.events, self.images = events, self

    def remove(self, ref: str) -> None:
        self.events.append(f"remove {ref.rsplit(':', 1)[-1]}")


def test_waves_are_the_gpu_families_in_order_runtime_and_devel_together(tmp_path: Path) -> None:
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    found = [[j.tag.split("_")[4] + "/" + j.tag.rsplit("_", 1)[-1] for j in wave] for wave in byfamily.waves(todo)]
    families = [j.tag.split("_")[4] for j in todo]
    assert sorted(found) == sorted([[f"{f}/runtime", f"{f}/devel"] for f in dict.fromkeys(families)]), found
    assert [wave[0].tag.split("_")[4] for wave in byfamily.waves(todo)] == list(dict.fromkeys(families))


def test_a_family_s_devel_leaves_before_the_next_bake_and_its_runtime_once_the_next_family_is_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_engine: list[list[str]]) -> None:  # noqa: F811
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    real_prepare = lifecycle.prepare

    def prepare(client: object, wave: list[jobs.Job], *args: object, **kwargs: object) -> lifecycle.Prepared:
        events.append("bake " + " ".join(sorted(j.tag.split("_")[4] for j in wave)))
        return real_prepare(client, wave, *args, **kwargs)  # type: ignore[arg-type]

    def run_image(client: object, job: jobs.Job, *args: object, **kwargs: object) -> ImageReport:
        events.append(f"publish {job.tag}")
        return replace(lifecycle.planned(job), state="published")

    def prune_cache(kit: BuildKit, since: float) -> bool:
        events.append("prune")
        return True

    monkeypatch.setattr(lifecycle, "prepare", prepare)
    monkeypatch.setattr(lifecycle, "run_image", run_image)
    monkeypatch.setattr(byfamily, "prune_cache", prune_cache)
    options = lifecycle.Options(validate=None, bake=BakeOptions(by_family=True))
    reports = lifecycle.run(_Images(events), todo, options)  # type: ignore[arg-type]
    first, second = [wave[0].tag.split("_")[4] for wave in byfamily.waves(todo)]
    assert [r.state for r in reports] == ["published"] * 4
    bakes = [i for i, e in enumerate(events) if e.startswith("bake")]
    assert [events[i] for i in bakes] == [f"bake {first} {first}", f"bake {second} {second}"]
    removed = [e for e in events if e.startswith("remove")]
    assert len(removed) == 4 and all(first in e for e in removed)  # content name and readable name, twice
    devel = [i for i, e in enumerate(events) if e.startswith("remove") and "devel" in e]
    runtime = [i for i, e in enumerate(events) if e.startswith("remove") and "runtime" in e]
    assert len(devel) == len(runtime) == 2
    assert max(devel) < bakes[1]  # the devel image goes before the next family's bake: it holds no shared layer
    assert bakes[1] < min(runtime) < events.index("prune")  # the runtime holds base and torch until the next is in
    assert events.count("prune") == 1 and not any(second in e for e in removed)
    assert len(no_engine) == 2


def test_without_by_family_a_row_is_one_bake_and_nothing_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                no_engine: list[list[str]]) -> None:  # noqa: F811
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    monkeypatch.setattr(lifecycle, "run_image", lambda client, job, *a, **k: lifecycle.planned(job))
    lifecycle.run(_Images(events), todo, lifecycle.Options(validate=None))  # type: ignore[arg-type]
    assert events == [] and len(no_engine) == 1


def test_between_waves_the_factory_s_aged_steps_and_pip_s_download_cache_are_pruned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    step = f"mount / from exec /bin/sh -c {records.STEP_START}  && x  && {records.STEP_CLAMP}"
    listing = records.parse("\n".join(json.dumps(r) for r in [
        {"ID": "aaa", "Parents": None, "Description": step, "Type": "regular"},
        {"ID": "bbb", "Parents": ["aaa"], "Description": "[runtime 5/5] WORKDIR /root", "Type": "regular"},
        {"ID": "ccc", "Parents": None, "Description": "a user's own step", "Type": "regular"}]))
    monkeypatch.setattr(records, "listed", lambda kit: listing)
    monkeypatch.setattr(byfamily.subprocess, "run", run)
    assert byfamily.prune_cache(BuildKit(name="b1"), time.monotonic() - 30)
    [aged, pip] = seen
    assert aged[:5] == ["docker", "buildx", "prune", "--builder", "b1"]
    assert aged[5:9] == ["--force", "--all", "--filter", 'id~="^(aaa|bbb)$"'] and aged[9] == "--filter"
    assert 30 <= int(aged[10].removeprefix("until=").removesuffix("s")) <= 31  # the factory's steps only
    assert pip[5:] == ["--force", "--filter", "type=exec.cachemount", "--filter",
                       f'description~="with id \\"/{PIP_CACHE_ID}\\"$"']
    monkeypatch.setattr(byfamily.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, "", ""))
    assert not byfamily.prune_cache(BuildKit(), time.monotonic())  # reported, never raised: pruning only frees disk
    monkeypatch.setattr(records, "listed", lambda kit: None)
    assert not byfamily.prune_steps(BuildKit())  # not listed: nothing is pruned blind


def _waves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: lifecycle.Options,
           first_ok: bool = True) -> list[str]:
    """A --by-family run of two families whose bakes and publishes are faked: what happened, in order."""
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)

    def prepare(client: object, wave: list[jobs.Job], opts: BakeOptions, *a: object) -> lifecycle.Prepared:
        earlier = opts.cache.earlier if opts.cache is not None else ()
        events.append(f"bake {wave[0].tag.split('_')[4]} importing {' '.join(earlier) or '-'}")
        ok = first_ok or len([e for e in events if e.startswith("bake")]) > 1
        return lifecycle.Prepared(built={j.tag: BuildResult(j.tag, ok, "sha256:" + "0" * 64) for j in wave})

    def published(client: object, job: jobs.Job, *args: object, **kwargs: object) -> ImageReport:
        return replace(lifecycle.planned(job), state="published")

    monkeypatch.setattr(lifecycle, "prepare", prepare)
    monkeypatch.setattr(lifecycle, "run_image", published)
    monkeypatch.setattr(byfamily, "prune_cache", lambda kit, since: events.append("prune aged") or True)
    monkeypatch.setattr(byfamily, "prune_steps", lambda kit: events.append("prune steps") or True)
    lifecycle.run(_Images([]), todo, options)  # type: ignore[arg-type]
    return events


def test_with_a_registry_cache_a_family_bakes_after_the_factory_s_steps_go_and_imports_the_last_wave_s_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache("127.0.0.1:5000/ns/buildcache", insecure=True)
    options = lifecycle.Options(validate=None, bake=BakeOptions(by_family=True, cache=cache))
    events = _waves(tmp_path, monkeypatch, options)
    first, second = (e.split()[1] for e in events if e.startswith("bake"))
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    targets = " ".join(j.rendered.target for j in byfamily.waves(todo)[0] if j.rendered is not None)
    assert first in targets and "runtime" in targets and "devel" in targets
    assert events == [f"bake {first} importing -", "prune steps", f"bake {second} importing {targets}",
                      "prune aged"]


@pytest.mark.parametrize("options", [lifecycle.Options(validate=None, bake=BakeOptions(by_family=True)),
                                     # --no-push: the command resolves the cache as import only
                                     lifecycle.Options(validate=None, bake=BakeOptions(by_family=True, cache=Cache(
                                         "127.0.0.1:5000/ns/buildcache", insecure=True, write=False)))],
                         ids=["no cache", "no push"])
def test_without_a_cache_to_import_the_factory_s_steps_stay_for_the_next_family(
        options: lifecycle.Options, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _waves(tmp_path, monkeypatch, options)
    assert "prune steps" not in events and all(e.endswith("importing -") for e in events if e.startswith("bake"))


def test_a_wave_whose_bake_failed_exported_no_cache_so_the_next_keeps_the_factory_s_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache("127.0.0.1:5000/ns/buildcache", insecure=True)
    options = lifecycle.Options(validate=None, bake=BakeOptions(by_family=True, cache=cache))
    events = _waves(tmp_path, monkeypatch, options, False)
    assert "prune steps" not in events and all(e.endswith("importing -") for e in events if e.startswith("bake"))


def test_the_step_filter_finds_every_run_of_every_rendered_dockerfile() -> None:
    """The prune takes BuildKit's records by the template's whole step form: a template RUN without it would stay on
    the disk. Each RUN as BuildKit describes its record: continuation lines joined, the --mount flags gone."""
    root = Path(__file__).resolve().parents[2] / "images"
    runs = [step.split("\n", 1)[0] for dockerfile in root.glob("*/Dockerfile")
            for step in dockerfile.read_text().replace("\\\n", "").split("\nRUN ")[1:]]
    assert len(runs) > 900
    flags = re.compile(r"^(?:\s*--mount=\S+)*\s*")
    described = ["mount / from exec /bin/sh -c " + flags.sub("", run) for run in runs]
    assert [d for d in described if not records.is_step(records.Record(ID="x", Description=d, Type="regular"))] == []


@pytest.mark.docker
def test_the_pip_cache_filter_takes_that_cache_mount_on_a_real_buildkit_and_no_other(
        base_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The template's cache mount, as BuildKit describes it (`... with id "/ID"`), under a test-only ID, beside an
    apt-like mount whose step's command names that ID: only the pip one goes."""
    run_id = f"rif-pip-test{uuid.uuid4().hex[:8]}"
    keep = f"rif-keep-test{uuid.uuid4().hex[:8]}"
    (tmp_path / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        f"RUN --mount=type=cache,id={run_id},target=/tmp echo {run_id} > /tmp/pip-wheel\n"
        f"RUN --mount=type=cache,id={keep},target=/var/cache/x echo {run_id} > /var/cache/x/deb\n")
    built = subprocess.run(["docker", "buildx", "build", "--network", "host", "--allow", "network.host",
                            "--output", "type=cacheonly", str(tmp_path)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-2000:]
    monkeypatch.setattr(byfamily, "PIP_CACHE_ID", run_id)
    assert byfamily.prune_cache(BuildKit(), time.monotonic() - 10 * 3600)  # aged: only what no test used for 10 h
    left = subprocess.run(["docker", "buildx", "du", "--verbose", "--filter", "type=exec.cachemount"],
                          capture_output=True, text=True, check=True).stdout
    assert f'with id "/{keep}"' in left and f'with id "/{run_id}"' not in left  # kept though its step names run_id


def _own_steps(monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """A test's own id and its RUN of the template's form: STEP_START narrowed to it, so the other tests' steps on
    this engine are not the prune's."""
    run_id = uuid.uuid4().hex[:12]
    monkeypatch.setattr(records, "STEP_START", f"{records.STEP_START} && echo ours-{run_id}")
    return run_id, (f"RUN --mount=type=cache,id=rif-test-{run_id},target=/tmp \\\n    {records.STEP_START}"
                    f" > /o{run_id} \\\n && echo {run_id} > /tmp/w \\\n && {records.STEP_CLAMP}\n")


def _build(folder: Path, dockerfile: str, output: str = "type=cacheonly") -> None:
    folder.mkdir()
    (folder / "Dockerfile").write_text(dockerfile)
    built = subprocess.run(["docker", "buildx", "build", "--network", "host", "--allow", "network.host",
                            "--output", output, str(folder)], capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr[-2000:]


def _left() -> str:
    return subprocess.run(["docker", "buildx", "du", "--verbose"], capture_output=True, text=True, check=True).stdout


@pytest.mark.docker
def test_the_step_prune_takes_the_factory_s_steps_and_their_cache_mounts_on_a_real_buildkit_and_no_other_build_s(
        base_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """prune_steps before a family's bake: every record of the template's step form, shared or not, its cache
    mounts and the WORKDIR record built on it; a step of another build stays."""
    run_id, run = _own_steps(monkeypatch)
    image = f"rif-test/steps-{run_id}:1"  # ours is held by an image: its record is shared, pruned with --all only
    _build(tmp_path / "ours", f"FROM {base_image}\n{run}WORKDIR /home/u{run_id}\n", f"type=image,name={image}")
    request.addfinalizer(lambda: subprocess.run(["docker", "image", "rm", image], capture_output=True, check=False))
    _build(tmp_path / "theirs", f"FROM {base_image}\nRUN echo theirs-{run_id} > /t\n")
    before = _left()
    assert f"ours-{run_id}" in before and f'with id "/rif-test-{run_id}"' in before
    assert byfamily.prune_steps(BuildKit())
    after = _left()
    assert f"ours-{run_id}" not in after and f'with id "/rif-test-{run_id}"' not in after
    assert f"WORKDIR /home/u{run_id}" in before and f"WORKDIR /home/u{run_id}" not in after  # a stage's last step
    assert f"theirs-{run_id}" in after


@pytest.mark.docker
def test_the_step_prune_keeps_another_build_s_steps_that_echo_the_mark_or_stand_on_a_factory_image(
        base_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """Another build's steps that echo the mark, and the whole start and clamp, and a build FROM a factory image
    (BuildKit chains its records onto the factory's): none is pruned. Before the fix each was taken."""
    run_id, run = _own_steps(monkeypatch)
    image = f"rif-test/steps-{run_id}:1"
    _build(tmp_path / "ours", f"FROM {base_image}\n{run}WORKDIR /root\n", f"type=image,name={image}")
    request.addfinalizer(lambda: subprocess.run(["docker", "image", "rm", image], capture_output=True, check=False))
    whole = shlex.quote(f"{records.STEP_START}  && {records.STEP_CLAMP}")
    _build(tmp_path / "theirs", f"FROM {base_image}\n"
           f"RUN echo 'touch --no-dereference --date=@0' theirs-mark-{run_id} > /m\n"
           f"RUN --mount=type=cache,id=theirs-{run_id},target=/tmp echo {whole} theirs-whole-{run_id} > /w\n"
           "WORKDIR /root\n")
    _build(tmp_path / "child", f"FROM {image}\nRUN echo theirs-child-{run_id} > /c\n")
    before = _left()
    assert all(f"theirs-{kind}-{run_id}" in before for kind in ("mark", "whole", "child"))
    assert byfamily.prune_steps(BuildKit())
    after = _left()
    assert all(f"theirs-{kind}-{run_id}" in after for kind in ("mark", "whole", "child"))
    assert f'with id "/theirs-{run_id}"' in after
    assert f'with id "/rif-test-{run_id}"' not in after  # the prune ran: our cache mount (held by no child) went


def test_each_combination_keeps_its_runtime_image_as_the_anchor_of_its_shared_layers(tmp_path: Path) -> None:
    two_os = TWO_FAMILIES.replace("os: [ubuntu-24.04]", "os: [ubuntu-24.04, ubuntu-22.04]").replace(
        "gfx: [gfx94X-dcgpu, gfx1151]", "gfx: [gfx1151]")
    todo = jobs.matrix_jobs(write_matrix(tmp_path, two_os), None, None, INDEX)
    assert len(todo) == 4 and len(byfamily.waves(todo)) == 1
    kept = byfamily.anchors(list(reversed(todo)))  # devel first: the runtime is still the one kept
    assert sorted(j.tag for j in kept) == sorted(j.tag for j in todo if j.tag.endswith("_runtime"))
    devel_only = [j for j in todo if j.tag.endswith("_devel")]
    assert byfamily.anchors(devel_only) == devel_only  # no runtime in the wave: one image per combination stays
