"""builder.validate.reuse: a pass is taken again only for the same image, expectations, checks and engine; a failure,
a --gpu validation, `builder test` and --revalidate never take one; whatever sits in the cache folder is read as
hostile (the same run against a real engine and registry: tests/e2e/test_build_push.py's push after build --push)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from builder.core.tags import LABEL_PREFIX
from builder.pipeline import steps
from builder.pipeline.options import ValidateOptions
from builder.render import labels
from builder.validate import reuse
from builder.validate.runner import Check, ValidationResult
from testkit.matrices import FAMILIES, load_cells

IMAGE = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64
# The fields of a real engine's `docker info` that make the engine's part of the key (read from the project engine,
# Docker 28.5.2 from Debian sid: ID is the engine's own UUID).
INFO = {"ID": "6e98889a-ec00-42fc-82f9-cc0a24975600", "ServerVersion": "28.5.2+dfsg4",
        "KernelVersion": "6.18.44-fc-v595", "OperatingSystem": "Debian GNU/Linux 12 (bookworm)",
        "Architecture": "x86_64", "DefaultRuntime": "runc", "CgroupVersion": "1", "CgroupDriver": "cgroupfs",
        "SecurityOptions": ["name=seccomp,profile=builtin"], "Containers": 3}
# builder.validate.sbom.inspect's answer, as in tests/pipeline/test_steps.py (its _SCRIPT in the example's image).
FACTS = {"os": {"ID": "debian", "VERSION_ID": "12"},
         "os_packages": {"type": "deb", "lines": "libc6 2.36-9+deb12u13 amd64"},
         "python": [{"name": "torch", "version": "2.13.0+cpu", "record_sha256": "a" * 64}]}
PASSED = [Check("testinfra", "torch_version", "pass"), Check("smoke", "gpu", "skip", "no GPU", "add --device")]


class Engine:
    def __init__(self, **info: Any) -> None:
        self.facts = {**INFO, **info}

    def info(self) -> dict[str, Any]:
        return dict(self.facts)


def job(expect: dict[str, Any] | None = None, labels: dict[str, str] | None = None) -> Any:
    return SimpleNamespace(tag="t1", expect=expect if expect is not None else {"torch": "2.13.0"}, labels=labels)


class Checks:
    """steps' validate_image and facts reader, counting the runs (each is three containers on a real engine)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, checks: list[Check] | None = None,
                 facts: dict[str, Any] | str = FACTS) -> None:
        self.runs = 0
        self.checks = list(PASSED if checks is None else checks)
        monkeypatch.setattr(steps, "validate_image", self.validate)
        monkeypatch.setattr(steps, "_facts", lambda client, image_id: facts)

    def validate(self, client: Any, ref: str, expect: Any, labels: Any, gpu: bool = False) -> ValidationResult:
        self.runs += 1
        return ValidationResult(ref, list(self.checks), 12.5)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return reuse.folder()


def validate(engine: Engine, options: ValidateOptions, image: str = IMAGE, expect: dict[str, Any] | None = None,
             labels: dict[str, str] | None = None) -> Any:
    return steps.validate(engine, job(expect, labels), image, options, lambda s: None)  # type: ignore[arg-type]


REUSE = ValidateOptions(reuse=True)


def test_a_pass_is_taken_again_with_its_checks_and_facts_and_says_when_it_ran(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = Checks(monkeypatch)
    before = time.time()
    first = validate(Engine(), REUSE)
    assert (checks.runs, first.reused, first.failure, first.seconds) == (1, None, None, 12.5)
    second = validate(Engine(Containers=9), REUSE)  # what changes with every run is not the engine's identity
    assert checks.runs == 1
    assert (second.checks, second.facts, second.packages, second.failure) == (tuple(PASSED), FACTS,
                                                                              ("torch==2.13.0+cpu",), None)
    ran = time.mktime(time.strptime(second.reused, "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
    assert before - 1 <= ran <= time.time()
    assert second.seconds != 12.5  # the lookup's own time, not the 12.5 s the kept checks took


@pytest.mark.parametrize("change", ["image", "expect", "labels", "engine id", "engine version", "kernel", "runtime",
                                    "checks", "gpu"])
def test_anything_that_can_change_the_verdict_runs_the_checks_again(change: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    checks = Checks(monkeypatch)
    validate(Engine(), REUSE)
    image, expect, labels, engine, options = IMAGE, None, None, Engine(), REUSE
    if change == "image":
        image = OTHER
    elif change == "expect":
        expect = {"torch": "2.12.0"}
    elif change == "labels":
        labels = {"org.opencontainers.image.version": "2"}
    elif change == "engine id":
        engine = Engine(ID="0c1f2e3d-0000-4000-8000-000000000000")
    elif change == "engine version":
        engine = Engine(ServerVersion="29.0.0")
    elif change == "kernel":
        engine = Engine(KernelVersion="6.1.0-40-amd64")
    elif change == "runtime":
        engine = Engine(DefaultRuntime="crun")
    elif change == "checks":
        reuse.checks_version.cache_clear()
        monkeypatch.setattr(reuse, "RUNNERS", (*reuse.RUNNERS, "a-newer-testinfra"))
    else:
        options = ValidateOptions(reuse=True, gpu=True)  # the host's GPUs and driver change under an unchanged image
    again = validate(engine, options, image, expect, labels)
    reuse.checks_version.cache_clear()
    assert (checks.runs, again.reused) == (2, None)


def test_a_builds_pass_answers_for_builder_push_of_the_image_when_its_labels_agree_with_its_cell_json(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # build and publish hold the image to the matrix's labels; `builder push IMAGE` has no matrix and holds it to the
    # cell.json it reads back from the image (builder.pipeline.jobs.job_for_image: JSON, as cell_json wrote it).
    cell = load_cells(tmp_path, FAMILIES)[0]
    built = cell.expectations()
    read_back = json.loads(labels.cell_json(cell))
    matrix_labels = labels.image_labels(cell, "sha256:" + "3" * 64)
    checks = Checks(monkeypatch)
    validate(Engine(), REUSE, expect=built, labels=matrix_labels)  # builder build
    pushed = validate(Engine(), REUSE, expect=read_back)  # builder push IMAGE
    assert (checks.runs, pushed.failure) == (1, None) and pushed.reused is not None
    assert validate(Engine(), REUSE, expect=built, labels=matrix_labels).reused is not None and checks.runs == 1
    # labels that do not say what cell.json says: the push's own label check could fail, so it runs
    for wrong in ({**matrix_labels, LABEL_PREFIX + "user": cell.user + "-not"},
                  {k: v for k, v in matrix_labels.items() if k != LABEL_PREFIX + "gfx-family"}):
        image = "sha256:" + f"{checks.runs:x}" * 64
        validate(Engine(), REUSE, image, expect=built, labels=wrong)
        runs = checks.runs
        assert validate(Engine(), REUSE, image, expect=read_back).reused is None and checks.runs == runs + 1
    # nor does a push's pass answer for a build, which holds the image to more labels than cell.json decides
    image = "sha256:" + "c" * 64
    validate(Engine(), REUSE, image, expect=read_back)
    assert validate(Engine(), REUSE, image, expect=built, labels=matrix_labels).reused is None


def test_builder_test_and_revalidate_always_run_the_checks_and_keep_their_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = Checks(monkeypatch)
    validate(Engine(), REUSE)
    again = validate(Engine(), ValidateOptions())  # `builder test`, or --revalidate
    assert (checks.runs, again.reused) == (2, None)
    [entry] = reuse.folder().iterdir()
    kept_at = reuse.Entry.model_validate_json(entry.read_bytes()).validated_at
    assert kept_at >= time.time() - 5  # the newer pass is the one on record
    assert validate(Engine(), REUSE).reused is not None and checks.runs == 2


def test_a_failure_a_pass_without_facts_and_a_gpu_pass_are_never_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    failing = Checks(monkeypatch, [Check("smoke", "torch", "fail", "no torch")])
    assert validate(Engine(), REUSE).failure == "validation"
    assert validate(Engine(), REUSE).failure == "validation" and failing.runs == 2
    unread = Checks(monkeypatch, facts="python3 in x exited 1: no venv")  # the SBOM step fails on it
    validate(Engine(), REUSE)
    validate(Engine(), REUSE)
    assert unread.runs == 2
    gpu = Checks(monkeypatch)
    validate(Engine(), ValidateOptions(reuse=True, gpu=True))
    assert not reuse.folder().exists() or not list(reuse.folder().iterdir())
    validate(Engine(), REUSE)
    assert gpu.runs == 2


def test_an_engine_that_cannot_say_what_it_is_neither_keeps_nor_takes(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = Checks(monkeypatch)
    for engine in (Engine(ID=""), Engine(ID=None)):
        validate(engine, REUSE)
    assert checks.runs == 2 and not reuse.folder().exists()


def test_the_apptainer_part_runs_on_a_pass_taken_and_can_fail_it(monkeypatch: pytest.MonkeyPatch) -> None:
    Checks(monkeypatch)
    validate(Engine(), REUSE)
    under = [Check("apptainer", "writable_root", "fail", "needs a writable /opt/venv")]
    asked: list[str] = []
    monkeypatch.setattr(steps.apptainer, "run_apptainer", lambda client, ref: asked.append(ref) or list(under))
    failed = validate(Engine(), ValidateOptions(reuse=True, apptainer=True))
    assert asked == [IMAGE] and failed.reused is not None
    assert (failed.failure, failed.checks[-1]) == ("validation", under[0])


def _entry_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    Checks(monkeypatch)
    validate(Engine(), REUSE)
    [path] = reuse.folder().iterdir()
    return path


def _hostile(kind: str, path: Path, tmp_path: Path) -> None:
    body = path.read_text()
    if kind == "not json":
        path.write_text("{" + body)
    elif kind == "an unknown key":
        path.write_text(body[:-1] + ', "trusted": true}')
    elif kind == "a failed check":
        path.write_text(body.replace('"status":"pass"', '"status":"fail"'))
    elif kind == "no checks":
        path.write_text(body.replace(body[body.index('"checks":'):body.index(',"facts"')], '"checks":[]'))
    elif kind == "another key":
        path.write_text(body.replace(path.stem, "f" * 64))
    elif kind == "another image":
        path.write_text(body.replace(IMAGE, OTHER))
    elif kind in ("too old", "from the future"):
        entry = reuse.Entry.model_validate_json(body)
        when = time.time() + (-reuse.MAX_AGE_S - 60 if kind == "too old" else 3600)
        path.write_text(entry.model_copy(update={"validated_at": when}).model_dump_json())
    elif kind == "too large":
        with path.open("ab") as f:
            f.truncate(reuse.MAX_ENTRY_BYTES + 1)  # sparse: costs nothing, read never
    elif kind == "a link":
        target = tmp_path / "elsewhere.json"
        target.write_text(body)
        path.unlink()
        path.symlink_to(target)
    elif kind == "a fifo":
        path.unlink()
        os.mkfifo(path)
    elif kind == "a folder":
        path.unlink()
        path.mkdir()


@pytest.mark.parametrize("kind", ["not json", "an unknown key", "a failed check", "no checks", "another key",
                                  "another image", "too old", "from the future", "too large", "a link", "a fifo",
                                  "a folder"])
def test_a_cache_entry_that_is_not_ours_in_every_detail_is_a_miss(kind: str, monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    path = _entry_path(monkeypatch)
    _hostile(kind, path, tmp_path)
    checks = Checks(monkeypatch)
    again = validate(Engine(), REUSE)
    assert (checks.runs, again.reused, again.failure) == (1, None, None)


def test_the_oldest_entries_go_past_the_limit_and_nothing_else_is_touched(monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    monkeypatch.setattr(reuse, "MAX_ENTRIES", 2)
    Checks(monkeypatch)
    folder = reuse.folder()
    folder.mkdir(parents=True)
    notes = folder / "notes.txt"
    notes.write_text("mine")
    outside = tmp_path / "keep.json"
    outside.write_text("{}")
    planted = folder / ("0" * 64 + ".json")
    planted.symlink_to(outside)
    os.utime(planted, (1, 1), follow_symlinks=False)
    images = [f"sha256:{n}" + "c" * 63 for n in range(4)]
    for n, image in enumerate(images):
        validate(Engine(), REUSE, image)
        os.utime(next(p for p in folder.iterdir() if p.stat(follow_symlinks=False).st_mtime > 1e9
                      and image in p.read_text()), (1000 + n, 1000 + n))
    kept = sorted(reuse.Entry.model_validate_json(p.read_bytes()).image_id for p in folder.glob("*.json")
                  if not p.is_symlink())
    assert kept == images[2:]
    assert notes.read_text() == "mine" and planted.is_symlink() and outside.read_text() == "{}"


def test_an_unwritable_cache_costs_only_the_reuse(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a file where the folder would be
    checks = Checks(monkeypatch)
    assert validate(Engine(), REUSE).failure is None and validate(Engine(), REUSE).failure is None
    assert checks.runs == 2


def test_build_publish_and_push_take_a_pass_unless_revalidate_and_builder_test_never(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from builder.cli import build, publish, runs
    from builder.cli.app import app
    from builder.publish.record import ImageReport

    asked: list[tuple[str, ValidateOptions | None]] = []
    monkeypatch.setattr(runs, "run", lambda todo, options, *args: asked.append(("run", options.validate)) or 0)
    monkeypatch.setattr(build, "connect", Engine)
    monkeypatch.setattr(publish, "connect", Engine)
    monkeypatch.setattr(build.lifecycle, "run_image",
                        lambda client, job, options: asked.append(("test", options.validate))
                        or ImageReport(tag="t", repository="pytorch", tags=("t",), immutable_tag="t-x",
                                       content_hash="sha256:" + "0" * 64, state="validated"))
    monkeypatch.setattr(build.jobs, "job_for_image", lambda *args, **kwargs: job())
    matrix = str(Path(__file__).resolve().parents[2] / "examples" / "local.yaml")
    registry = ["--registry", "127.0.0.1:5000/ns"]
    for args in (["build", "--matrix", matrix], ["publish", "--matrix", matrix, *registry],
                 ["push", "reg.lan/ns/pytorch:t", *registry], ["test", "reg.lan/ns/pytorch:t"]):
        for extra in ([], ["--revalidate"]):
            if args[0] == "test" and extra:
                continue
            result = CliRunner().invoke(app, [*args, *extra])
            assert result.exit_code == 0, result.output
            _, options = asked.pop()
            assert options is not None
            assert options.reuse is (not extra and args[0] != "test"), (args, extra)
    refused = CliRunner().invoke(app, ["test", "reg.lan/ns/pytorch:t", "--revalidate"])
    assert refused.exit_code == 2  # `builder test` always runs the checks: no such option there
    no_checks = CliRunner().invoke(app, ["build", "--matrix", matrix, "--no-validate", "--revalidate"])
    assert no_checks.exit_code == 2 and "--revalidate" in no_checks.output
