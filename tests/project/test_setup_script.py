"""scripts/setup.sh, sourced into an interactive shell, changes only what it says it exports.

No engine is needed: the script runs in a copy of the checkout whose .venv is already installed, with fake
`docker` and friends on PATH and a registry stand-in on 127.0.0.1, so it takes its "already there" paths; the
failing case is an engine without the containerd image store, the script's own `return 1`. The engine answering on
the project's socket is a stand-in process named by the socket's pid file, as setup.sh's dockerd is: a copy of
bash run from a checkout's .rif/engine with `--config-file` on its command line, so that /proc/PID/exe and
/proc/PID/cmdline read as a real engine's do (tests/project/test_setup_engine.py does it with a real one).
"""

from __future__ import annotations

import contextlib
import http.server
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from testkit.serving import POLL_S
from tests.fakes.checkout import ROOT

FAKE_DOCKER = """#!/bin/sh
case "$*" in
  "info -f {{.ServerVersion}} {{.DriverStatus}}") echo "28.5.1 $DRIVER_STATUS" ;;
  "info -f {{.DriverStatus}}") echo "$DRIVER_STATUS" ;;
  "info") ;;
  "buildx version") echo "github.com/docker/buildx v0.29.1 0000000" ;;
  *) echo "fake docker: $*" >&2; exit 1 ;;
esac
"""
SNAPSHOTTER = "[[driver-type io.containerd.snapshotter.v1]]"
OVERLAY = "[[Backing Filesystem extfs] [Supports d_type true]]"
# Everything the interactive shell is compared on, before and after `source`: options, traps, directory,
# functions, shell variables (those the script exports and bash's own changing ones left out).
SNAPSHOT = r"""snap() {
  echo "opts=$-"; trap -p; echo "pwd=$PWD"; declare -F
  compgen -v | grep -vxE 'RIF_TEST_REGISTRY|RIF_STARTED|RIF_BUILD_NETWORK|DOCKER_HOST|PATH|_|BASH_.*|LINENO' \
    | grep -vxE 'RANDOM|SECONDS|SRANDOM|EPOCH.*|PIPESTATUS|FUNCNAME|OLDPWD|COLUMNS|LINES|HISTCMD|rc|before'
}
"""


@pytest.fixture()
def stand_in_registry() -> Iterator[str]:
    """A stand-in for the local registry: /v2/ answers 200, which is all setup.sh asks of it. Not named
    `registry`: that name marks a test `registry` (tests/conftest.py), which the fast tier deselects."""
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True).start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture()
def checkout(tmp_path: Path) -> Path:
    """A copy of the checkout's set-up with its .venv installed and the engine's tools faked on PATH."""
    root = tmp_path / "checkout"
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    os.utime(root / "pyproject.toml", (1_000_000, 1_000_000))
    _executable(root / ".venv" / "bin" / "builder", "#!/bin/sh\n")
    (root / ".venv" / ".installed").touch()
    dockerd = root / ".rif" / "engine" / "usr" / "sbin" / "dockerd"
    _executable(dockerd, "#!/bin/sh\necho 'Docker version 28.5.1, build x'\n")
    fake = tmp_path / "bin"
    _executable(fake / "docker", FAKE_DOCKER)
    for tool in ("docker-registry", "debootstrap", "chromium", "runc", "tini-static"):
        _executable(fake / tool, "#!/bin/sh\nexit 1\n")
    (fake / "python3").symlink_to(sys.executable)
    return root


EngineAt = Callable[[Path], "subprocess.Popen[bytes]"]


@pytest.fixture()
def engine_of(checkout: Path) -> Iterator[EngineAt]:
    """engine_of(CHECKOUT): a stand-in engine started from CHECKOUT's .rif/ (its binary a copy of bash, its
    --config-file CHECKOUT/.rif/daemon.json), named by the socket's pid file as setup.sh's dockerd is. Each is
    reaped the moment it ends (setup.sh waits for a stopped engine to be gone) and its group killed at teardown."""
    started: list[subprocess.Popen[bytes]] = []

    def start(owner: Path) -> subprocess.Popen[bytes]:
        binary = owner / ".rif" / "engine" / "usr" / "bin" / "engine-stand-in"
        binary.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy("/bin/bash", binary)
        config = owner / ".rif" / "daemon.json"
        config.write_text("{}\n")
        proc = subprocess.Popen([str(binary), "-c", "sleep 600; :", "--config-file", str(config)],
                                start_new_session=True)
        threading.Thread(target=proc.wait, daemon=True).start()
        run = checkout.parent / "run"
        run.mkdir(exist_ok=True)
        (run / "dockerd.pid").write_text(f"{proc.pid}\n")
        started.append(proc)
        return proc

    yield start
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


def _executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)


def _interactive(checkout: Path, stand_in_registry: str, driver_status: str, extra_env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    script = (SNAPSHOT + "set -o noclobber; trap 'echo hup' HUP; cd /; before=$(snap)\n"
              f"source {checkout}/scripts/setup.sh; rc=$?\n"
              "false; echo alive rc=$rc\n"
              "[ \"$(snap)\" = \"$before\" ] && echo unchanged || diff <(echo \"$before\") <(snap)\n"
              "echo \"DOCKER_HOST=${DOCKER_HOST-unset}\"; echo \"RIF_TEST_REGISTRY=$RIF_TEST_REGISTRY\"\n"
              "echo \"PATH=$PATH\"; echo \"RIF_BUILD_NETWORK=${RIF_BUILD_NETWORK-unset}\"\n")
    env = {"PATH": f"{checkout.parent / 'bin'}:/usr/bin:/bin", "HOME": str(checkout.parent), "TERM": "dumb",
           "RIF_TEST_REGISTRY": stand_in_registry, "DRIVER_STATUS": driver_status,
           "RIF_ENGINE_RUN": str(checkout.parent / "run"), **(extra_env or {})}
    return subprocess.run(["bash", "--norc", "--noprofile", "-i", "-c", script], capture_output=True, text=True,
                          env=env, stdin=subprocess.DEVNULL, timeout=120, check=False)


def test_sourcing_exports_what_it_says_and_leaves_the_shell_as_it_was(checkout: Path, stand_in_registry: str) -> None:
    proc = _interactive(checkout, stand_in_registry, SNAPSHOTTER, {"DOCKER_HOST": "unix:///run/elsewhere.sock"})
    assert "alive rc=0" in proc.stdout, proc.stdout + proc.stderr
    assert "unchanged" in proc.stdout, proc.stdout + proc.stderr
    assert f"PATH={checkout}/.venv/bin:" in proc.stdout
    assert f"RIF_TEST_REGISTRY={stand_in_registry}" in proc.stdout
    assert "DOCKER_HOST=unix:///run/elsewhere.sock" in proc.stdout  # a modern engine already answering: kept
    assert "RIF_BUILD_NETWORK=host" in proc.stdout  # the engine has no bridge: its builds need the host's network


def test_a_failing_setup_returns_instead_of_closing_the_shell(checkout: Path, stand_in_registry: str,
                                                             engine_of: EngineAt) -> None:
    """An engine without the containerd image store: the script's `return 1`, which used to be `exit 1`."""
    engine_of(checkout)
    proc = _interactive(checkout, stand_in_registry, OVERLAY)
    assert "does not use the containerd image store" in proc.stderr
    assert "alive rc=1" in proc.stdout, proc.stdout + proc.stderr
    assert "unchanged" in proc.stdout, proc.stdout + proc.stderr
    assert f"{checkout}/.venv/bin" not in proc.stdout  # nothing exported from a failed set-up


def test_a_script_that_sources_it_with_errexit_still_stops_on_failure(checkout: Path, stand_in_registry: str,
                                                                     engine_of: EngineAt) -> None:
    """scripts/test.sh and example.sh rely on `set -e` ending them when the set-up fails."""
    engine_of(checkout)
    script = f"set -euo pipefail\nsource {checkout}/scripts/setup.sh\necho went-on\n"
    env = {"PATH": f"{checkout.parent / 'bin'}:/usr/bin:/bin", "HOME": str(checkout.parent),
           "RIF_TEST_REGISTRY": stand_in_registry, "DRIVER_STATUS": OVERLAY,
           "RIF_ENGINE_RUN": str(checkout.parent / "run")}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 1
    assert "went-on" not in proc.stdout


def test_exports_reach_a_script_that_sources_it(checkout: Path, stand_in_registry: str, engine_of: EngineAt) -> None:
    """RIF_STARTED must reach scripts/stop.sh, which reads it from the environment of the script that sourced."""
    engine_of(checkout)
    script = (f"set -euo pipefail\nsource {checkout}/scripts/setup.sh\n"
              "bash -c 'echo \"child sees ${RIF_STARTED+set} $RIF_TEST_REGISTRY $DOCKER_HOST\"'\n")
    env = {"PATH": f"{checkout.parent / 'bin'}:/usr/bin:/bin", "HOME": str(checkout.parent),
           "RIF_TEST_REGISTRY": stand_in_registry, "DRIVER_STATUS": SNAPSHOTTER,
           "RIF_ENGINE_RUN": str(checkout.parent / "run"),
           "RIF_DOCKER_HOST": "unix:///run/ours.sock"}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert f"child sees set {stand_in_registry} unix:///run/ours.sock" in proc.stdout


# --- the engine on the project's socket: used only when it is this checkout's ----------------------------------

def _source(checkout: Path, stand_in_registry: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{checkout.parent / 'bin'}:/usr/bin:/bin", "HOME": str(checkout.parent),
           "RIF_TEST_REGISTRY": stand_in_registry, "DRIVER_STATUS": SNAPSHOTTER,
           "RIF_ENGINE_RUN": str(checkout.parent / "run"), "RIF_DOCKER_HOST": "unix:///run/ours.sock"}
    return subprocess.run(["bash", "-c", f"source {checkout}/scripts/setup.sh"], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def _gone(proc: subprocess.Popen[bytes]) -> bool:
    return not Path(f"/proc/{proc.pid}").exists()


def test_this_checkouts_engine_is_used(checkout: Path, stand_in_registry: str, engine_of: EngineAt) -> None:
    engine = engine_of(checkout)
    proc = _source(checkout, stand_in_registry)
    assert proc.returncode == 0, proc.stderr
    assert "setup: the engine" not in proc.stdout + proc.stderr and not _gone(engine)


def test_another_checkouts_engine_stops_setup_with_one_line(checkout: Path, stand_in_registry: str,
                                                            engine_of: EngineAt) -> None:
    """Its files are all there: it may be in use from that checkout, so it is named, not stopped."""
    other = checkout.parent / "other"
    engine = engine_of(other)
    proc = _source(checkout, stand_in_registry)
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        f"setup: the engine on unix:///run/ours.sock (dockerd {engine.pid}) was started from {other}, not this "
        f"checkout ({checkout}): stop it (sudo kill {engine.pid}; whoever uses it there loses it) or work in that "
        "checkout, then source scripts/setup.sh again"]
    assert not _gone(engine)


@pytest.mark.parametrize("what", ["checkout", "binary", "config"])
def test_an_engine_whose_files_are_gone_is_stopped(checkout: Path, stand_in_registry: str, engine_of: EngineAt,
                                                   what: str) -> None:
    """The issue's case (its checkout deleted: /proc/PID/exe reads '... (deleted)'), and each half of it."""
    owner = checkout.parent / "deleted" if what == "checkout" else checkout
    engine = engine_of(owner)
    binary, config = owner / ".rif" / "engine" / "usr" / "bin" / "engine-stand-in", owner / ".rif" / "daemon.json"
    if what == "checkout":
        shutil.rmtree(owner)
    else:
        (binary if what == "binary" else config).unlink()
    proc = _source(checkout, stand_in_registry)
    assert proc.returncode == 0, proc.stderr
    gone = config if what == "config" else binary
    assert (f"setup: the engine on unix:///run/ours.sock (dockerd {engine.pid}) runs files that are gone ({gone}): "
            "stopping it to start this checkout's") in proc.stdout
    assert _gone(engine)


def test_an_engine_no_pid_file_names_stops_setup_with_one_line(checkout: Path, stand_in_registry: str) -> None:
    proc = _source(checkout, stand_in_registry)
    assert proc.returncode == 1
    assert len(proc.stderr.splitlines()) == 1
    assert proc.stderr.startswith(f"setup: an engine answers on unix:///run/ours.sock but {checkout.parent}/run/"
                                  "dockerd.pid names no running dockerd: stop it")
