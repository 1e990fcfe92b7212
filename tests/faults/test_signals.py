"""Interrupted runs end cleanly: exit 130/143, no containers or temporary folders left, the record written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import docker
import pytest

from tests.fakes.checkout import DATA, ROOT, builder_cli

pytestmark = pytest.mark.docker

RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"


def ours() -> set[str]:
    return {p.name for p in Path(tempfile.gettempdir()).glob("rif-*") if p.is_dir()}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_validation_cleans_up_and_records(signum: int, code: int, base_image: str, wheelhouse: Path,
                                                         tmp_path: Path, docker_client: docker.DockerClient) -> None:
    before_dirs = ours()
    built = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--cell", RUNTIME, "--wheelhouse", str(wheelhouse),
                        "--no-validate")
    assert built.returncode == 0, built.stdout + built.stderr
    image = docker_client.images.get(f"rocm-image-factory/pytorch:{RUNTIME}").id  # only its containers count
    before_containers = {c.id for c in docker_client.containers.list(all=True, filters={"ancestor": image})}
    report = tmp_path / "record.json"
    # As from a terminal: a handled SIGINT becomes the default in the child, where a suite started in the
    # background (`&`) would pass its ignored SIGINT on.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    proc = subprocess.Popen(
        [sys.executable, "-m", "builder", "build", "--matrix", str(DATA / "e2e.yaml"), "--cell", RUNTIME,
         "--wheelhouse", str(wheelhouse), "--report", str(report), "--progress", "plain"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    signal.signal(signal.SIGINT, previous)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("==> validate"):
            break
    deadline = time.monotonic() + 60  # wait until validation has its container running, then interrupt
    while time.monotonic() < deadline:
        if {c.id for c in docker_client.containers.list(all=True, filters={"ancestor": image})} - before_containers:
            break
        time.sleep(0.2)
    os.kill(proc.pid, signum)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, out + err
    assert "Traceback" not in err
    data = json.loads(report.read_text())
    assert data["complete"] is False
    [row] = data["images"]
    assert row["tag"] == RUNTIME and row["state"] not in ("validated", "published")
    left = {c.id for c in docker_client.containers.list(all=True, filters={"ancestor": image})} - before_containers
    assert not left, f"containers left behind: {left}"
    assert ours() <= before_dirs, f"temporary folders left behind: {ours() - before_dirs}"
