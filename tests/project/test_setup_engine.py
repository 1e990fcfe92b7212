"""scripts/setup.sh with a real engine whose checkout is gone (issue 50): a second engine and registry, each on
its own socket, data root, exec root and port, started by setup.sh from a copy of the checkout; the copy is
deleted (the engine then runs binaries and a config that are gone: `/proc/PID/exe` reads `... (deleted)`), and
setup.sh from another copy stops both and starts its own, on which an image then runs and is pushed.

The machine's own engine and registry are never touched: every path and the port come from setup.sh's variables
(RIF_ENGINE_RUN, RIF_ENGINE_DATA, RIF_DOCKER_HOST, RIF_TEST_REGISTRY), and only the processes this test started
(by their pid files) are stopped. Two engines coexist: each dockerd runs its own managed containerd under its
exec root (`<exec-root>/containerd/containerd.sock`) as long as no system containerd listens on
/run/containerd/containerd.sock, which dockerd would otherwise share.
"""

from __future__ import annotations

import io
import os
import shutil
import socket
import subprocess
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.checkout import ROOT

ENGINE = ROOT / ".rif" / "engine"  # what scripts/setup.sh unpacked: the binaries a copy of the checkout runs
TINI = shutil.which("tini-static")  # a static binary (setup.sh installs it): an image of one file, no base needed
SYSTEM_CONTAINERD = Path("/run/containerd/containerd.sock")


def _runnable() -> str | None:
    """Why this machine cannot run a second project engine, or None. Without .rif/engine the machine uses an engine
    it already had (a runner's), so setup.sh never starts one there and none of its engines can go stale."""
    if os.geteuid() != 0:
        return "starts a second dockerd: needs root"
    if not (ENGINE / "usr" / "sbin" / "dockerd").exists():
        return "needs the project's engine in .rif/engine (scripts/setup.sh unpacks it where it starts its own)"
    if TINI is None or shutil.which("docker-registry") is None:
        return "needs tini-static and docker-registry (scripts/setup.sh installs them)"
    if SYSTEM_CONTAINERD.exists():
        return f"a system containerd listens on {SYSTEM_CONTAINERD}: a second dockerd would share it"
    return None


@dataclass(frozen=True)
class Second:
    """The second engine's and registry's places: all under one short folder (a unix socket path has 108 bytes)."""

    base: Path
    port: int

    @property
    def run(self) -> Path:
        return self.base / "run"

    @property
    def host(self) -> str:
        return f"unix://{self.run / 'docker.sock'}"

    @property
    def registry(self) -> str:
        return f"127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "RIF_"))}
        return {**env, "RIF_ENGINE_RUN": str(self.run), "RIF_ENGINE_DATA": str(self.base / "data"),
                "RIF_DOCKER_HOST": self.host, "RIF_TEST_REGISTRY": self.registry}

    def docker(self, *args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run(["docker", "-H", self.host, *args], input=stdin, capture_output=True, timeout=300,
                              check=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _checkout(root: Path) -> Path:
    """A copy of what setup.sh reads: the script, the engine's binaries (hard links: a copy in seconds, and the
    running binary's own name is what `... (deleted)` is about), and the installed .venv (a link: the stub
    pyproject.toml is older than .venv/.installed, so nothing is installed into it)."""
    (root / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", root / "scripts" / "setup.sh")
    (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    os.utime(root / "pyproject.toml", (1_000_000, 1_000_000))
    (root / ".venv").symlink_to(ROOT / ".venv")
    shutil.copytree(ENGINE, root / ".rif" / "engine", symlinks=True, copy_function=_link_or_copy)
    return root


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _setup(checkout: Path, second: Second) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", "-c", f"source {checkout}/scripts/setup.sh"], capture_output=True, text=True,
                          env=second.env(), timeout=300, check=False, stdin=subprocess.DEVNULL)


def _pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _exe(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/exe")


def _stop(pid: int | None) -> None:
    """Stop a process this test started (named by a pid file it wrote) and wait for it to go."""
    if pid is None or not Path(f"/proc/{pid}").exists():
        return
    subprocess.run(["kill", str(pid)], check=False)
    subprocess.run(["timeout", "60", "tail", f"--pid={pid}", "-f", "/dev/null"], check=False)
    if Path(f"/proc/{pid}").exists():
        subprocess.run(["kill", "-9", str(pid)], check=False)


def _unmount(base: Path) -> None:
    """What the second engine left mounted under its folder (netns, snapshots): only mounts under base."""
    points = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    for point in sorted((p for p in points if p.startswith(f"{base}/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _tini_image() -> bytes:
    """A root filesystem of one static binary, for `docker import`: a container start needs nothing more."""
    assert TINI is not None
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        tar.add(TINI, arcname="tini")
    return out.getvalue()


@pytest.fixture()
def second() -> Iterator[Second]:
    problem = _runnable()
    if problem is not None:
        pytest.skip(problem)
    base = Path(subprocess.run(["mktemp", "-d", "/tmp/rif-se-XXXXXX"], capture_output=True, text=True,
                               check=True).stdout.strip())
    where = Second(base, _free_port())
    pids: list[int | None] = []
    try:
        yield where
    finally:
        pids += [_pid(where.run / "dockerd.pid"), _pid(base / "first" / ".rif" / "registry.pid"),
                 _pid(base / "second" / ".rif" / "registry.pid")]
        for pid in pids:
            _stop(pid)
        _unmount(base)
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.docker
def test_setup_replaces_an_engine_and_a_registry_whose_checkout_is_gone(second: Second) -> None:
    first = _checkout(second.base / "first")
    started = _setup(first, second)
    assert started.returncode == 0, started.stdout + started.stderr
    assert f"starting dockerd 28.x on {second.host}" in started.stdout
    assert f"starting a registry on {second.registry}" in started.stdout
    engine_pid, registry_pid = _pid(second.run / "dockerd.pid"), _pid(first / ".rif" / "registry.pid")
    assert engine_pid is not None and registry_pid is not None
    assert _exe(engine_pid) == str(first / ".rif" / "engine" / "usr" / "sbin" / "dockerd")
    # Its BuildKit frees disk only when the disk needs it (below 8 GB free, never under 2 GB of cache), not by
    # BuildKit's default (20% of the disk kept free, the cache cut to 10% of it), which evicted the torch steps.
    policy = second.docker("buildx", "inspect").stdout.decode()
    rules = [rule for rule in policy.split("GC Policy rule#")[1:] if "All:" in rule]
    assert len(rules) == 4, policy
    for rule in rules[1:]:
        assert "Min Free Space: 8GiB" in " ".join(rule.split()) and "Reserved Space: 2GiB" in " ".join(rule.split())

    ref = f"{second.registry}/rif-stale/tini:1"
    assert second.docker("import", "-", ref, stdin=_tini_image()).returncode == 0

    shutil.rmtree(first)  # a user deletes the clone the engine was started from
    assert _exe(engine_pid).endswith(" (deleted)") and second.docker("info").returncode == 0  # still answers
    stale = second.docker("run", "--rm", "--network", "none", ref, "/tini", "--version")
    assert stale.returncode != 0 and b"containerd-shim-runc-v2" in stale.stderr  # the failing start

    replaced = _setup(_checkout(second.base / "second"), second)
    assert replaced.returncode == 0, replaced.stdout + replaced.stderr
    out = replaced.stdout
    assert f"setup: the engine on {second.host} (dockerd {engine_pid}) runs files that are gone" in out
    assert f"setup: the registry on {second.registry} (docker-registry {registry_pid}) runs files that are gone" in out
    assert not Path(f"/proc/{engine_pid}").exists() and not Path(f"/proc/{registry_pid}").exists()
    new_pid = _pid(second.run / "dockerd.pid")
    assert new_pid is not None and new_pid != engine_pid
    assert _exe(new_pid) == str(second.base / "second" / ".rif" / "engine" / "usr" / "sbin" / "dockerd")

    # The recovered engine (the same data root: the image is still there) starts containers and publishes.
    ran = second.docker("run", "--rm", "--network", "none", ref, "/tini", "--version")
    assert ran.returncode == 0 and b"tini version" in ran.stdout, ran.stderr
    pushed = second.docker("push", ref)
    assert pushed.returncode == 0, pushed.stderr
