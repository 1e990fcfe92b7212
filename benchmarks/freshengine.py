"""A second dockerd with an empty data root, as a cold runner has: for benchmarks that must not find the layers,
images or BuildKit cache of the machine's own engine (scripts/setup.sh's binaries, containerd image store)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ENGINE = Path(__file__).resolve().parent.parent / ".rif" / "engine"  # scripts/setup.sh unpacks it here


@contextmanager
def empty_engine(root: Path) -> Iterator[str]:
    """A second dockerd (the same binaries, containerd image store) on its own socket and empty data root: the
    machine's engine holds the layers it built, so a pull there would move nothing. Yields its DOCKER_HOST."""
    sock = f"unix://{root / 'docker.sock'}"
    conf = root / "daemon.json"
    root.mkdir(parents=True)
    conf.write_text(json.dumps({"features": {"containerd-snapshotter": True}, "bridge": "none", "iptables": False,
                                "ip6tables": False, "ip-forward": False}))
    env = {**os.environ, "PATH": f"{ENGINE / 'usr/bin'}:{ENGINE / 'usr/sbin'}:{os.environ['PATH']}"}
    proc = subprocess.Popen(["dockerd", "--config-file", str(conf), "--data-root", str(root / "data"), "--exec-root",
                             str(root / "exec"), "--pidfile", str(root / "dockerd.pid"), "-H", sock], env=env,
                            stdout=subprocess.DEVNULL, stderr=(root / "dockerd.log").open("wb"), start_new_session=True)
    try:
        for _ in range(60):
            if subprocess.run(["docker", "-H", sock, "info"], capture_output=True, check=False).returncode == 0:
                break
            time.sleep(1)
        yield sock
    finally:
        proc.terminate()
        proc.wait(timeout=60)
