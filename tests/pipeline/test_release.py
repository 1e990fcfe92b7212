"""`publish --release`: one GPU family at a time; the previous family's images leave the engine (and BuildKit's cache
of them) only once this family's are baked and loaded."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest

from builder.buildkit import records
from builder.buildkit.bake import BuildResult
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Cache
from builder.pipeline import jobs, lifecycle, release
from builder.publish.record import ImageReport
from builder.render.sources import INDEX, PIP_CACHE_ID
from tests.fakes.matrices import write_matrix
from tests.pipeline.test_lifecycle import TWO_FAMILIES, no_engine  # noqa: F401 - the fixture


class _Images:
    """An engine's images: records what is removed, and when (into the shared event list)."""

    def __init__(self, events: list[str]) -> None:
        self.events, self.images = events, self

    def remove(self, ref: str) -> None:
        self.events.append(f"remove {ref.rsplit(':', 1)[-1]}")


def test_waves_are_the_gpu_families_in_order_runtime_and_devel_together(tmp_path: Path) -> None:
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    found = [[j.tag.split("_")[4] + "/" + j.tag.rsplit("_", 1)[-1] for j in wave] for wave in release.waves(todo)]
    families = [j.tag.split("_")[4] for j in todo]
    assert sorted(found) == sorted([[f"{f}/runtime", f"{f}/devel"] for f in dict.fromkeys(families)]), found
    assert [wave[0].tag.split("_")[4] for wave in release.waves(todo)] == list(dict.fromkeys(families))


def test_a_family_s_devel_leaves_before_the_next_bake_and_its_runtime_once_the_next_family_is_in(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_engine: list[list[str]]) -> None:  # noqa: F811
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    real_prepare = lifecycle.prepare

    def prepare(client: object, wave: list[jobs.Job], *args: object, **kwargs: object) -> lifecycle.Prepared:
        events.append("bake " + " ".join(sorted(j.tag.split("_")[4] for j in wave)))
        return real_prepare(client, wave, *args, **kwargs)  # type: ignore[arg-type]

    def run_image(client: object, job: jobs.Job, *args: object, **kwargs: object) -> ImageReport:
        report = job.report()
        report.state = "published"
        events.append(f"publish {job.tag}")
        return report

    def prune_cache(kit: BuildKit, since: float) -> bool:
        events.append("prune")
        return True

    monkeypatch.setattr(lifecycle, "prepare", prepare)
    monkeypatch.setattr(lifecycle, "run_image", run_image)
    monkeypatch.setattr(release, "prune_cache", prune_cache)
    reports = lifecycle.run(_Images(events), todo, lifecycle.Options(validate=False, release=True))  # type: ignore[arg-type]
    first, second = [wave[0].tag.split("_")[4] for wave in release.waves(todo)]
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


def test_without_release_a_row_is_one_bake_and_nothing_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              no_engine: list[list[str]]) -> None:  # noqa: F811
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    monkeypatch.setattr(lifecycle, "run_image", lambda client, job, *a, **k: job.report())
    lifecycle.run(_Images(events), todo, lifecycle.Options(validate=False))  # type: ignore[arg-type]
    assert events == [] and len(no_engine) == 1


def test_between_waves_the_factory_s_aged_steps_and_pip_s_download_cache_are_pruned(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    listing = records.parse("\n".join([
        f'{{"ID": "aaa", "Parents": null, "Description": "mount / from exec x && {records.STEP_MARK} -- {{}} +"}}',
        '{"ID": "bbb", "Parents": ["aaa"], "Description": "[runtime 5/5] WORKDIR /root"}',
        '{"ID": "ccc", "Parents": null, "Description": "a user\'s own step"}']))
    monkeypatch.setattr(records, "listed", lambda kit: listing)
    monkeypatch.setattr(release.subprocess, "run", run)
    assert release.prune_cache(BuildKit(name="b1"), time.monotonic() - 30)
    [aged, pip] = seen
    assert aged[:5] == ["docker", "buildx", "prune", "--builder", "b1"]
    assert aged[5:9] == ["--force", "--all", "--filter", 'id~="^(aaa|bbb)$"'] and aged[9] == "--filter"
    assert 30 <= int(aged[10].removeprefix("until=").removesuffix("s")) <= 31  # the factory's steps only
    assert pip[5:] == ["--force", "--filter", "type=exec.cachemount", "--filter",
                       f'description~="with id \\"/{PIP_CACHE_ID}\\"$"']
    monkeypatch.setattr(release.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, "", ""))
    assert not release.prune_cache(BuildKit(), time.monotonic())  # reported, never raised: pruning only frees disk
    monkeypatch.setattr(records, "listed", lambda kit: None)
    assert not release.prune_steps(BuildKit())  # not listed: nothing is pruned blind


def _waves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: lifecycle.Options,
           first_ok: bool = True) -> list[str]:
    """A --release run of two families whose bakes and publishes are faked: what happened, in order."""
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)

    def prepare(client: object, wave: list[jobs.Job], opts: lifecycle.Options, *a: object) -> lifecycle.Prepared:
        earlier = opts.cache.earlier if opts.cache is not None else ()
        events.append(f"bake {wave[0].tag.split('_')[4]} importing {' '.join(earlier) or '-'}")
        ok = first_ok or len([e for e in events if e.startswith("bake")]) > 1
        return lifecycle.Prepared(built={j.tag: BuildResult(j.tag, ok, "sha256:" + "0" * 64) for j in wave})

    def published(client: object, job: jobs.Job, *args: object, **kwargs: object) -> ImageReport:
        report = job.report()
        report.state = "published"
        return report

    monkeypatch.setattr(lifecycle, "prepare", prepare)
    monkeypatch.setattr(lifecycle, "run_image", published)
    monkeypatch.setattr(release, "prune_cache", lambda kit, since: events.append("prune aged") or True)
    monkeypatch.setattr(release, "prune_steps", lambda kit: events.append("prune steps") or True)
    lifecycle.run(_Images([]), todo, options)  # type: ignore[arg-type]
    return events


def test_with_a_registry_cache_a_family_bakes_after_the_factory_s_steps_go_and_imports_the_last_wave_s_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache("127.0.0.1:5000/ns/buildcache", insecure=True)
    events = _waves(tmp_path, monkeypatch, lifecycle.Options(validate=False, release=True, cache=cache))
    first, second = (e.split()[1] for e in events if e.startswith("bake"))
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    targets = " ".join(j.rendered.target for j in release.waves(todo)[0] if j.rendered is not None)
    assert first in targets and "runtime" in targets and "devel" in targets
    assert events == [f"bake {first} importing -", "prune steps", f"bake {second} importing {targets}",
                      "prune aged"]


@pytest.mark.parametrize("options", [lifecycle.Options(validate=False, release=True),
                                     lifecycle.Options(validate=False, release=True, no_push=True,
                                                       cache=Cache("127.0.0.1:5000/ns/buildcache", insecure=True))],
                         ids=["no cache", "no push"])
def test_without_a_cache_to_import_the_factory_s_steps_stay_for_the_next_family(
        options: lifecycle.Options, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    events = _waves(tmp_path, monkeypatch, options)
    assert "prune steps" not in events and all(e.endswith("importing -") for e in events if e.startswith("bake"))


def test_a_wave_whose_bake_failed_exported_no_cache_so_the_next_keeps_the_factory_s_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = Cache("127.0.0.1:5000/ns/buildcache", insecure=True)
    events = _waves(tmp_path, monkeypatch, lifecycle.Options(validate=False, release=True, cache=cache), False)
    assert "prune steps" not in events and all(e.endswith("importing -") for e in events if e.startswith("bake"))


def test_the_step_filter_finds_every_run_of_every_rendered_dockerfile() -> None:
    """The prune takes BuildKit's records by STEP_MARK: a template RUN without it would stay on the disk."""
    root = Path(__file__).resolve().parents[2] / "images"
    runs = [step for dockerfile in root.glob("*/Dockerfile")
            for step in dockerfile.read_text().replace("\\\n", " ").split("\nRUN ")[1:]]
    assert len(runs) > 900
    assert [r for r in runs if records.STEP_MARK not in r.split("\n", 1)[0]] == []


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
    monkeypatch.setattr(release, "PIP_CACHE_ID", run_id)
    assert release.prune_cache(BuildKit(), time.monotonic() - 10 * 3600)  # aged: only what no test used for 10 h
    left = subprocess.run(["docker", "buildx", "du", "--verbose", "--filter", "type=exec.cachemount"],
                          capture_output=True, text=True, check=True).stdout
    assert f'with id "/{keep}"' in left and f'with id "/{run_id}"' not in left  # kept though its step names run_id


@pytest.mark.docker
def test_the_step_prune_takes_the_factory_s_steps_and_their_cache_mounts_on_a_real_buildkit_and_no_other_build_s(
        base_image: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    """prune_steps before a family's bake: every record whose step carries STEP_MARK (the template's clamp), shared
    or not, its cache mounts and the WORKDIR record built on it; a step of another build (no mark) stays. The mark
    is narrowed to this test's own file, so the other tests' steps on this engine stay cached."""
    run_id = uuid.uuid4().hex[:12]
    monkeypatch.setattr(records, "STEP_MARK", f"{records.STEP_MARK} -- /o{run_id}")
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    ours.mkdir(), theirs.mkdir()
    (ours / "Dockerfile").write_text(
        f"FROM {base_image}\n"
        f"RUN --mount=type=cache,id=rif-test-{run_id},target=/tmp echo {run_id} > /tmp/w"
        f" && echo ours-{run_id} > /o{run_id} && {records.STEP_MARK}\n"
        f"WORKDIR /w{run_id}\n")  # as an image stage ends: a record whose description names no command
    (theirs / "Dockerfile").write_text(f"FROM {base_image}\nRUN echo theirs-{run_id} > /t\n")
    image = f"rif-test/steps-{run_id}:1"  # ours is held by an image: its record is shared, pruned with --all only
    for folder, output in ((ours, f"type=image,name={image}"), (theirs, "type=cacheonly")):
        built = subprocess.run(["docker", "buildx", "build", "--network", "host", "--allow", "network.host",
                                "--output", output, str(folder)], capture_output=True, text=True, check=False)
        assert built.returncode == 0, built.stderr[-2000:]
    request.addfinalizer(lambda: subprocess.run(["docker", "image", "rm", image], capture_output=True, check=False))

    def left() -> str:
        return subprocess.run(["docker", "buildx", "du", "--verbose"], capture_output=True, text=True,
                              check=True).stdout

    before = left()
    assert f"ours-{run_id}" in before and f'with id "/rif-test-{run_id}"' in before
    assert release.prune_steps(BuildKit())
    after = left()
    assert f"ours-{run_id}" not in after and f'with id "/rif-test-{run_id}"' not in after
    assert f"WORKDIR /w{run_id}" in before and f"WORKDIR /w{run_id}" not in after
    assert f"theirs-{run_id}" in after


def test_each_combination_keeps_its_runtime_image_as_the_anchor_of_its_shared_layers(tmp_path: Path) -> None:
    two_os = TWO_FAMILIES.replace("os: [ubuntu-24.04]", "os: [ubuntu-24.04, ubuntu-22.04]").replace(
        "gfx: [gfx94X-dcgpu, gfx1151]", "gfx: [gfx1151]")
    todo = jobs.matrix_jobs(write_matrix(tmp_path, two_os), None, None, INDEX)
    assert len(todo) == 4 and len(release.waves(todo)) == 1
    kept = release.anchors(list(reversed(todo)))  # devel first: the runtime is still the one kept
    assert sorted(j.tag for j in kept) == sorted(j.tag for j in todo if j.tag.endswith("_runtime"))
    devel_only = [j for j in todo if j.tag.endswith("_devel")]
    assert release.anchors(devel_only) == devel_only  # no runtime in the wave: one image per combination stays
