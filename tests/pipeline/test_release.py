"""`publish --release`: one GPU family at a time; the previous family's images leave the engine (and BuildKit's cache
of them) only once this family's are baked and loaded."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path

import pytest

from builder.buildkit.builders import BuildKit
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


def test_a_family_leaves_the_engine_after_the_next_one_is_baked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                no_engine: list[list[str]]) -> None:  # noqa: F811
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
    assert bakes[1] < events.index(removed[0]) < events.index("prune")  # after the next family is in
    assert events.count("prune") == 1 and not any(second in e for e in removed)
    assert len(no_engine) == 2


def test_without_release_a_row_is_one_bake_and_nothing_leaves(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              no_engine: list[list[str]]) -> None:  # noqa: F811
    events: list[str] = []
    todo = jobs.matrix_jobs(write_matrix(tmp_path, TWO_FAMILIES), None, None, INDEX)
    monkeypatch.setattr(lifecycle, "run_image", lambda client, job, *a, **k: job.report())
    lifecycle.run(_Images(events), todo, lifecycle.Options(validate=False))  # type: ignore[arg-type]
    assert events == [] and len(no_engine) == 1


def test_between_waves_the_aged_steps_and_pip_s_download_cache_are_pruned(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def run(cmd: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(release.subprocess, "run", run)
    assert release.prune_cache(BuildKit(name="b1"), time.monotonic() - 30)
    [aged, pip] = seen
    assert aged[:5] == ["docker", "buildx", "prune", "--builder", "b1"]
    assert aged[5:] == ["--force", "--filter", aged[-1]]
    assert 30 <= int(aged[-1].removeprefix("until=").removesuffix("s")) <= 31
    assert pip[5:] == ["--force", "--filter", "type=exec.cachemount", "--filter",
                       f'description~="with id \\"/{PIP_CACHE_ID}\\"$"']
    monkeypatch.setattr(release.subprocess, "run", lambda cmd, **k: subprocess.CompletedProcess(cmd, 1, "", ""))
    assert not release.prune_cache(BuildKit(), time.monotonic())  # reported, never raised: pruning only frees disk


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
