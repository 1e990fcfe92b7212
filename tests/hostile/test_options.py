"""Random option values, every option of every command: a clean exit (0, 1 or 2), never the crash handler.

No engine and no registry: the engine socket does not exist, every TCP connect is refused and every name is
unknown, every program a command starts fails at once, so each command ends on its own words before any
real work. Each example is bounded by a hang guard (SIGALRM).
"""

from __future__ import annotations

import errno
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from typer.core import TyperGroup, TyperOption
from typer.testing import CliRunner

from builder.cli.app import app
from testkit.matrices import ONE_CPU

COMMAND = typer.main.get_command(app)
assert isinstance(COMMAND, TyperGroup)
# every (command, parameter) pair: options by their first name, arguments by position
PARAMS = [(name, param) for name, sub in sorted(COMMAND.commands.items()) for param in sub.params
          if not getattr(param, "is_flag", False)]
HANG_GUARD_S = 20


class Hang(Exception):
    """The hang guard fired: a command waited on something (a FIFO, a socket) instead of failing."""


def _alarm(signum: int, frame: Any) -> None:
    raise Hang(f"no answer in {HANG_GUARD_S} s")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder holding a one-cell matrix, with the network, the engine and every program out of reach."""
    here = tmp_path_factory.mktemp("options")
    (here / "matrix.yaml").write_text(ONE_CPU)
    os.mkfifo(here / "fifo")  # special files to name, inside the folder: a FIFO, a link to /dev/zero
    (here / "zero").symlink_to("/dev/zero")
    patch = pytest.MonkeyPatch()
    patch.chdir(here)
    for name, value in {"DOCKER_HOST": f"unix://{here}/no-engine.sock", "XDG_CACHE_HOME": str(here / "cache"),
                        "HOME": str(here)}.items():
        patch.setenv(name, value)
    for name in ("RIF_REGISTRY", "RIF_BUILDER", "RIF_BUILD_NETWORK", "RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"):
        patch.delenv(name, raising=False)

    def refused(self: socket.socket, address: Any) -> None:
        if self.family == socket.AF_UNIX:
            raise FileNotFoundError(errno.ENOENT, "no engine here", str(address))
        raise ConnectionRefusedError(errno.ECONNREFUSED, "refused (test)")

    def unknown(host: Any, *args: Any, **kwargs: Any) -> Any:
        raise socket.gaierror(socket.EAI_NONAME, "unknown name (test)")

    start = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def failing(self: subprocess.Popen[Any], args: Any, executable: Any, *rest: Any) -> Any:
        return start(self, ["false"], None, *rest)  # pip, docker, debootstrap: each fails at once, says nothing

    patch.setattr(time, "sleep", lambda seconds: None)  # a registry's retries back off in no time
    patch.setattr(socket.socket, "connect", refused)
    patch.setattr(socket.socket, "connect_ex", refused)
    patch.setattr(socket, "getaddrinfo", unknown)
    patch.setattr(subprocess.Popen, "_execute_child", failing)
    yield here
    patch.undo()


def _invoke(args: list[str]) -> tuple[int, str]:
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(HANG_GUARD_S)
    try:
        result = CliRunner().invoke(app, args, catch_exceptions=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.output


def inside(value: str) -> str:
    """value, kept inside the test's folder when it names a path: the commands run as this user (root, on the
    project's machines) and write where --out, --record or --dest say; an absolute path or `..` would reach the
    machine's own files (a run once replaced /dev/zero this way)."""
    value = value.replace("..", "_.")
    return "./" + value.lstrip("/") if value.startswith("/") else value


def _args(command: str, param: Any, value: str) -> list[str]:
    sub = COMMAND.commands[command]
    required = [p for p in sub.params if p.required and p is not param]
    args = [command]
    for p in required:  # a plausible value for each other required one
        args += [p.opts[0], "x"] if isinstance(p, TyperOption) else ["x"]
    value = inside(value)
    args += [param.opts[0], value] if isinstance(param, TyperOption) else [value]
    return args


TEXT = st.one_of(st.text(max_size=60), st.text(alphabet="0123456789/²³¹٣-+. \x00\n", max_size=40),
                 st.integers(-(10 ** 60), 10 ** 60).map(str), st.sampled_from(["1/2", "0/0", "9" * 5000 + "/1",
                                                                                "fifo", "zero", ".", "..", "-"]))


@settings(max_examples=int(os.environ.get("RIF_OPTION_EXAMPLES", "120")), deadline=None,
          phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pick=st.sampled_from(PARAMS), value=TEXT)
def test_random_option_values_end_cleanly(world: Path, pick: tuple[str, Any], value: str) -> None:
    command, param = pick
    code, output = _invoke(_args(command, param, value))
    assert code in (0, 1, 2), (command, param.opts, value, code, output)
    assert "unexpected" not in output, (command, param.opts, value, output)


def test_every_command_is_covered() -> None:
    """The property above draws from every command: a new command or option is fed random text too."""
    assert {c for c, _ in PARAMS} == set(COMMAND.commands) - {c for c, sub in COMMAND.commands.items()
                                                              if all(getattr(p, "is_flag", False) for p in sub.params)}


BAD_SHARDS = ["²/³", "\u0661/\u0662", "1/" + "9" * 5000, "9" * 5000 + "/1", "1/2\n", " 1/2", "1 /2",
              "0/1", "2/1", "1/0", "1/100001", "1/10001", "+1/2", "1/2/3", "1", "", "1/2 "]


@pytest.mark.parametrize("spec", BAD_SHARDS)
@pytest.mark.parametrize("command", [["matrix", "--format", "github"],
                                     ["plan", "--registry", "127.0.0.1:5000/rif"],
                                     ["stages", "--cache-registry", "127.0.0.1:5000/rif"],
                                     ["publish", "--registry", "127.0.0.1:5000/rif"]])
def test_a_shard_that_is_not_k_of_n_in_ascii_digits_is_refused_by_name(world: Path, command: list[str],
                                                                         spec: str) -> None:
    code, output = _invoke([*command, "--shard", spec])
    assert code == 2, output
    assert "--shard" in output and "unexpected" not in output
