"""`builder stages` (builder.cli.stages): a line per shared stage, the log in a file, an exit code."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from builder.buildkit.bake import BuildResult, OnLine
from builder.buildkit.export import Cache
from builder.cli import stages
from builder.core.errors import InputError
from builder.pipeline import baking
from builder.pipeline.options import BakeOptions
from builder.pipeline.stagewave import StageOutcome
from builder.render.sharedstages import SharedStage
from tests.fakes import consoles


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> io.StringIO:
    monkeypatch.setattr(stages, "LOG_DIR", tmp_path / "logs")
    return consoles.capture(monkeypatch, "out", "err")


def outcome(key: str, ok: bool) -> StageOutcome:
    return StageOutcome(SharedStage(key, "combo-a", "torch", ("combo-a", "combo-b")),
                        BuildResult(key, ok, error=None if ok else "exit 1"))


def shared(monkeypatch: pytest.MonkeyPatch, outcomes: list[StageOutcome]) -> None:
    def build(todo: object, options: object, on_line: OnLine) -> list[StageOutcome]:
        on_line("stage", "\x1b[1m#1 DONE\x1b[0m\n")
        return outcomes
    monkeypatch.setattr(baking, "shared_stages", build)


OPTIONS = BakeOptions(cache=Cache("r.io/ns/buildcache"))


def test_without_a_cache_registry_it_is_a_usage_error() -> None:
    with pytest.raises(InputError) as exc:
        stages.run_stages([], BakeOptions())
    assert "--cache-registry" in str(exc.value)


def test_each_stage_gets_a_line_and_a_failure_exits_1_naming_the_log(shown: io.StringIO, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    shared(monkeypatch, [outcome("stage-1", True), outcome("stage-2", False)])
    code = stages.run_stages([], OPTIONS)
    text = shown.getvalue()
    assert code == 1
    assert "built stage-1 (torch of 2 combinations, from combo-a) -> r.io/ns/buildcache:stage-1" in text
    assert "failed stage-2" in text and "  exit 1" in text and "1 shared stage(s) failed" in text
    log = (tmp_path / "logs" / "shared-stages.log").read_text()
    assert "#1 DONE" in log and "\x1b" not in log


def test_nothing_shared_is_nothing_to_build_and_exit_0(shown: io.StringIO, monkeypatch: pytest.MonkeyPatch) -> None:
    shared(monkeypatch, [])
    assert stages.run_stages([], OPTIONS) == 0 and "nothing to build" in shown.getvalue()


def test_the_runner_disk_tells_the_first_wave_which_rows_split_a_combination(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from builder.cli.app import app
    from builder.publish import sizes
    from tests.fakes.checkout import ROOT

    seen: list[BakeOptions] = []
    monkeypatch.setattr(stages, "run_stages", lambda todo, options: seen.append(options) or 0)
    monkeypatch.setattr(sizes, "NEW_FACTOR", 0.4)  # where a split can help: tests/publish/test_rows_guards.py says why
    base = ["stages", "-m", str(ROOT / "matrix.yaml"), "--cache-registry", "r.io/ns", "--match", "rocm10.0_*"]
    for disk, split in (("35G", True), ("10T", False)):  # the 30-image rows peak at about 35.6 GiB (at 0.4)
        proc = CliRunner().invoke(app, [*base, "--runner-disk", disk])
        assert proc.exit_code == 0, proc.output
        row_of = seen[-1].row_of
        assert any("-part1-of-" in row for row in row_of.values()) is split and len(row_of) == 144


def test_the_command_checks_its_options_before_any_work(monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from builder.cli.app import app
    from tests.fakes.checkout import DATA

    monkeypatch.setattr(baking, "shared_stages", lambda *a: pytest.fail("built without a cache registry"))
    matrix = ["-m", str(DATA / "e2e.yaml")]
    for args, said in ((["--compression", "xz"], "--compression: 'xz'"), ([], "--cache-registry:"),
                       (["--cache-registry", "r.io/ns", "--build-network", "none"], "--build-network:"),
                       (["--cache-registry", "r.io/ns", "--registry", "r.io/ns"], "No such option: --registry"),
                       (["--cache-registry", "r.io/ns", "--no-push"], "No such option: --no-push")):
        proc = CliRunner().invoke(app, ["stages", *matrix, *args])
        assert proc.exit_code == 2 and said in proc.output, (args, proc.output)
