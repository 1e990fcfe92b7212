"""A second dockerd with an empty data root, as a cold runner has: for benchmarks that must not find the layers,
images or BuildKit cache of the machine's own engine (scripts/setup.sh's binaries, containerd image store).

It proves what it claims before a benchmark uses it: it is up (else the error shows its log's tail), it runs on
a containerd of its own (dockerd takes a system containerd at /run/containerd/containerd.sock when one runs, and
that one's content store would serve layers a cold runner must pull: so this starts its own containerd on a
private socket and passes `--containerd`, then checks the engine reports that address), and it holds no image,
container, volume or build cache. Loopback only: no bridge, no iptables.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

ENGINE = Path(__file__).resolve().parents[2] / ".rif" / "engine"  # scripts/setup.sh unpacks it here
UP_SECONDS = 60.0
SNAPSHOTTER = "io.containerd.snapshotter.v1.overlayfs"
DAEMON = {"features": {"containerd-snapshotter": True}, "bridge": "none", "iptables": False, "ip6tables": False,
          "ip-forward": False, "ip-masq": False, "userland-proxy": False}


class EngineError(RuntimeError):
    """The fresh engine did not come up, or is not the private, empty engine a benchmark needs."""


@dataclass(frozen=True)
class Engine:
    """A running fresh engine: its DOCKER_HOST, its folder, and the containerd socket it was started on."""

    host: str
    root: Path
    containerd: Path

    @property
    def snapshots(self) -> Path:
        """Where its containerd keeps the unpacked layers (one folder per snapshot, each with its fs/)."""
        return self.root / "containerd" / "root" / SNAPSHOTTER / "snapshots"


def containerd_config(root: Path) -> str:
    """A containerd of the engine's own: every path under root (no default /run/containerd or /var/lib path),
    the Kubernetes CRI plugin off as dockerd's managed containerd has it."""
    return "\n".join([
        "version = 2",
        f'root = "{root / "containerd" / "root"}"',
        f'state = "{root / "containerd" / "state"}"',
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]',
        "[grpc]",
        f'  address = "{root / "containerd.sock"}"',
        "[ttrpc]",
        f'  address = "{root / "containerd.sock.ttrpc"}"',
        "[debug]",
        f'  address = "{root / "containerd-debug.sock"}"',
        "",
    ])


def log_tail(log: Path, lines: int = 30) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def check_private(info: Mapping[str, Any], containerd: Path) -> None:
    """The engine's `docker info` must name our containerd socket, not a shared one."""
    address = str((info.get("Containerd") or {}).get("Address") or "")
    if address != str(containerd):
        raise EngineError(f"the fresh engine uses containerd at {address or '(not reported)'}, not its own "
                          f"{containerd}: a shared containerd would serve layers a cold engine must pull")
    if (info.get("Driver") or "") != "overlayfs":
        raise EngineError(f"the fresh engine's storage driver is {info.get('Driver')!r}, not the containerd "
                          "snapshotter (overlayfs) production uses")


def check_empty(df_rows: list[Mapping[str, Any]], image_ids: str) -> None:
    """`docker system df --format json` rows and `docker images -aq`: nothing may be there yet."""
    held = [f"{row.get('Type')}: {row.get('TotalCount')}" for row in df_rows if str(row.get("TotalCount", "0")) != "0"]
    if image_ids.strip():
        held.append(f"images: {', '.join(image_ids.split())}")
    if not df_rows:
        held.append("`docker system df` reported nothing")
    if held:
        raise EngineError("the fresh engine is not empty: " + "; ".join(held))


def docker_out(host: str, *args: str, env: Mapping[str, str] | None = None) -> str:
    proc = subprocess.run(["docker", "-H", host, *args], capture_output=True, text=True, check=False,
                          env=dict(env) if env is not None else None, timeout=120)
    if proc.returncode != 0:
        raise EngineError(f"docker {' '.join(args)} on the fresh engine failed: {proc.stderr.strip()[-500:]}")
    return proc.stdout


def engine_info(host: str, env: Mapping[str, str]) -> dict[str, Any] | None:
    """`docker info` of the engine, or None while it does not answer."""
    answer = subprocess.run(["docker", "-H", host, "info", "--format", "{{json .}}"], capture_output=True, text=True,
                            check=False, env=dict(env))
    if answer.returncode != 0:
        return None
    info: dict[str, Any] = json.loads(answer.stdout)
    return info


Started = tuple[str, "subprocess.Popen[bytes]", Path]  # a process of the engine: its name, itself, its log


def wait_up(procs: list[Started], probe: Callable[[], dict[str, Any] | None],
            seconds: float = UP_SECONDS) -> dict[str, Any]:
    """Poll probe until it answers; an exited process or the deadline is an error with the log's tail."""
    deadline = time.monotonic() + seconds
    while True:
        for name, proc, log in procs:
            if proc.poll() is not None:
                raise EngineError(f"{name} exited ({proc.returncode}) before the engine came up; {log}:\n"
                                  f"{log_tail(log)}")
        info = probe()
        if info is not None:
            return info
        if time.monotonic() > deadline:
            name, _, log = procs[-1]
            raise EngineError(f"the fresh engine did not answer `docker info` within {seconds:.0f} s; {log}:\n"
                              f"{log_tail(log)}")
        time.sleep(0.5)


def prove(engine: Engine, info: Mapping[str, Any], env: Mapping[str, str]) -> None:
    check_private(info, engine.containerd)
    rows = [json.loads(line) for line in docker_out(engine.host, "system", "df", "--format", "{{json .}}",
                                                    env=env).splitlines() if line.strip()]
    check_empty(rows, docker_out(engine.host, "images", "-aq", env=env))


def _start(cmd: list[str], log: Path, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
    out: IO[bytes] = log.open("wb")
    try:
        return subprocess.Popen(cmd, env=dict(env), stdout=subprocess.DEVNULL, stderr=out, start_new_session=True)
    finally:
        out.close()  # the child holds its own copy


def _unmount(root: Path) -> None:
    """What the engine left mounted under its folder (its netns file, a snapshot): unmounted, so that the folder
    can go. Only mounts under root: they are the engine's."""
    mounts = Path("/proc/self/mounts").read_text().splitlines()
    points = [line.split()[1].replace("\\040", " ") for line in mounts if len(line.split()) > 1]
    for point in sorted((p for p in points if p.startswith(f"{root}/")), key=len, reverse=True):
        subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def empty_engine(root: Path) -> Iterator[Engine]:
    """A fresh dockerd (the same binaries, containerd image store) on its own socket, data root and containerd,
    proven up, private and empty. root must not exist yet (nothing of another run may be in it)."""
    root.mkdir(parents=True)
    engine = Engine(f"unix://{root / 'docker.sock'}", root, root / "containerd.sock")
    (root / "containerd.toml").write_text(containerd_config(root))
    (root / "daemon.json").write_text(json.dumps(DAEMON))
    env = {**os.environ, "PATH": f"{ENGINE / 'usr/bin'}:{ENGINE / 'usr/sbin'}:{os.environ['PATH']}"}
    env.pop("DOCKER_HOST", None)
    with ExitStack() as stack:
        stack.callback(_unmount, root)  # last, once both processes are gone
        containerd = _start(["containerd", "--config", str(root / "containerd.toml")], root / "containerd.log", env)
        stack.callback(_stop, containerd)
        dockerd = _start(["dockerd", "--config-file", str(root / "daemon.json"), "--data-root", str(root / "data"),
                          "--exec-root", str(root / "exec"), "--pidfile", str(root / "dockerd.pid"),
                          "--containerd", str(engine.containerd), "-H", engine.host], root / "dockerd.log", env)
        stack.callback(_stop, dockerd)  # stopped first: it still talks to containerd while it shuts down
        procs = [("containerd", containerd, root / "containerd.log"), ("dockerd", dockerd, root / "dockerd.log")]
        info = wait_up(procs, lambda: engine_info(engine.host, env))
        prove(engine, info, env)
        yield engine
