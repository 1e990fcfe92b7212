"""Interrupted runs end cleanly: exit 130/143, no containers or temporary folders left, the record written."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from tests.fakes.checkout import DATA, ROOT, builder_cli

pytestmark = pytest.mark.docker

RUNTIME = "cpu_debian12_py3.11_torch2.13.0_runtime"


def ours(tmpdir: Path) -> set[str]:
    """The factory's temporary folders in the run's own TMPDIR: another run on the machine (the fast tier's
    validations beside this one) makes its own elsewhere, so only this run's count."""
    return {p.name for p in tmpdir.glob("rif-*")}


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_validation_cleans_up_and_records(signum: int, code: int, base_image: str, wheelhouse: Path,
                                                         tmp_path: Path, docker_client: docker.DockerClient) -> None:
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
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
         "--wheelhouse", str(wheelhouse), "--report", str(report), "--progress", "plain",
         "--revalidate"],  # the checks run (an earlier test's pass of this image would be taken without them)
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "TMPDIR": str(tmpdir)})
    signal.signal(signal.SIGINT, previous)
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("==> validate"):
            break
    deadline = time.monotonic() + 60  # wait until validation has its container and its folder, then interrupt
    while time.monotonic() < deadline:
        running = {c.id for c in docker_client.containers.list(all=True, filters={"ancestor": image})}
        if running - before_containers and ours(tmpdir):
            break
        time.sleep(0.2)
    made = ours(tmpdir)
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
    assert made, "the run was interrupted before validation made its folder: nothing to clean up was tested"
    assert not ours(tmpdir), f"temporary folders left behind: {ours(tmpdir)}"
