"""The build display: one line per image and stage, logs to files without ANSI, a tail and the path on failure."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from rich.console import Console

from builder.cli.progress import RunView


def test_plain_mode_prints_a_line_per_stage_and_logs_lines_to_files(tmp_path: Path) -> None:
    console = Console(file=io.StringIO(), width=80)
    view = RunView(["a_runtime", "a_devel"], "plain", tmp_path / "logs", console)
    with view.running():
        events = view.events()
        events.stage("a_runtime", "build")
        events.line("a_runtime", "\x1b[91mdebconf: delaying package configuration\x1b[0m")
        events.stage("a_devel", "validate")
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert shown.splitlines() == ["==> build a_runtime (1/2)", "==> validate a_devel (2/2)"]
    log = (tmp_path / "logs" / "a_runtime.log").read_text()
    assert log == "==> build\ndebconf: delaying package configuration\n"


def test_json_mode_prints_one_object_per_event(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    view = RunView(["x"], "json", tmp_path / "logs", Console(file=io.StringIO()))
    with view.running():
        view.events().stage("x", "build")
        view.events().line("x", "Step 1/9")
    [line] = capsys.readouterr().out.splitlines()
    event = json.loads(line)
    assert (event["event"], event["tag"], event["stage"], event["index"], event["total"]) == ("stage", "x", "build",
                                                                                             1, 1)


def test_a_rerun_starts_a_fresh_log(tmp_path: Path) -> None:
    for _ in range(2):
        view = RunView(["x"], "plain", tmp_path, Console(file=io.StringIO()))
        with view.running():
            view.events().line("x", "once")
    assert (tmp_path / "x.log").read_text() == "once\n"
