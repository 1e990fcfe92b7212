"""builder.cli.kit: what every command shares: checked options, exit codes by kind of failure, SIGTERM, flags."""

from __future__ import annotations

import io
import os
import signal
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
import typer

from builder.buildkit.builders import CURRENT, BuildKit
from builder.cli import kit
from builder.cli.kit import buildkit
from builder.core.errors import InputError, usage_error
from builder.registry.errors import RegistryError
from builder.render.sources import WheelSource
from tests.fakes import consoles
from tests.fakes.checkout import DATA, builder_cli


def test_the_builder_options_are_checked_before_anything_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    assert buildkit(None, "default") == CURRENT  # buildx's current builder, BuildKit's own network
    assert buildkit(" rif-second ", "host") == BuildKit("rif-second", "host")
    for builder, network, option in ((None, "bridge", "--build-network"), ("", "host", "--builder")):
        with pytest.raises(InputError) as caught:
            buildkit(builder, network)
        assert caught.value.problems[0].key == option
    monkeypatch.setenv("RIF_BUILD_NETWORK", "bridge")
    for command in (["build"], ["publish", "--registry", "127.0.0.1:1/x"], ["reproduce", "127.0.0.1:1/x/y:z"]):
        proc = builder_cli(*command, "--matrix", str(DATA / "e2e.yaml"))
        assert proc.returncode == 2 and "--build-network: 'bridge': default or host" in proc.stderr, proc.stderr


def test_version_and_flags_shown_as_flags() -> None:
    proc = builder_cli("--version")
    assert proc.returncode == 0 and proc.stdout.startswith("builder (rocm-image-factory) ")
    for command in ("build", "publish", "push", "matrix", "render"):
        text = builder_cli(command, "--help").stdout
        assert "<bool>" not in text, command
    assert "--push " in builder_cli("build", "--help").stdout


@pytest.fixture
def err(monkeypatch: pytest.MonkeyPatch) -> io.StringIO:
    return consoles.capture(monkeypatch, "err")


def raising(exc: BaseException) -> Callable[[], None]:
    @kit.handles_errors
    def command() -> None:
        raise exc
    return command


@pytest.mark.parametrize(("exc", "code", "said"), [
    (usage_error("--x", "bad"), kit.EXIT_BAD_INPUT, "error: (command line): --x: bad"),
    (NotImplementedError("dnf is not rendered yet"), kit.EXIT_BAD_INPUT, "error: dnf is not rendered yet"),
    (RegistryError("denied"), kit.EXIT_FAILED, "error: registry: denied"),
    (KeyboardInterrupt(), kit.EXIT_SIGINT, "error: interrupted"),
    (kit.Terminated(), kit.EXIT_SIGTERM, "error: terminated"),
])
def test_each_kind_of_failure_has_its_exit_code_and_one_line(err: io.StringIO, exc: BaseException, code: int,
                                                              said: str) -> None:
    with pytest.raises(typer.Exit) as caught:
        raising(exc)()
    assert caught.value.exit_code == code and err.getvalue().splitlines() == [said]


def test_an_unexpected_error_exits_1_with_its_traceback_in_a_private_log(err: io.StringIO, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    with pytest.raises(typer.Exit) as caught:
        raising(ZeroDivisionError("boom"))()
    assert caught.value.exit_code == kit.EXIT_FAILED
    [log] = tmp_path.glob("rif-crash-*.log")
    assert f"unexpected ZeroDivisionError: boom (traceback in {log})" in err.getvalue()
    assert "Traceback" in log.read_text() and log.stat().st_mode & 0o777 == 0o600


def test_exits_and_results_pass_through() -> None:
    with pytest.raises(typer.Exit):
        raising(typer.Exit(0))()
    assert kit.handles_errors(lambda: 7)() == 7


def test_sigterm_raises_terminated_inside_the_block_only() -> None:
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(kit.Terminated), kit.terminates():
        os.kill(os.getpid(), signal.SIGTERM)
    assert signal.getsignal(signal.SIGTERM) == before


def test_wheel_source_paths_are_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert kit.wheel_source(Path("wh"), Path("locks")) == WheelSource(tmp_path / "wh", tmp_path / "locks")
    assert kit.wheel_source(None) == WheelSource(None, None)
