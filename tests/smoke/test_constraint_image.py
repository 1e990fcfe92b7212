"""The torch pip cannot swap out, in the example's runtime image (examples/local.yaml, built by `builder build` from
the real CPU torch wheelhouse), run with no network: a local wheel that requires torch==2.0.0 fails with pip's
conflict and torch stays; a local wheel with no torch requirement installs; torch-smoke says the constraint is in
force. The wheels are made here (testkit/synthwheels.py: METADATA, WHEEL and RECORD as pip checks them)."""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from builder.buildkit.engine import run_captured
from testkit import synthwheels
from tests.fakes.checkout import ROOT, builder_cli

pytestmark = pytest.mark.docker

SCRIPT = """
python -c 'import torch; print("before", torch.__version__)'
pip install --no-index --disable-pip-version-check /wheels/needs_old_torch-1.0-py3-none-any.whl; echo "old-rc=$?"
python -c 'import torch; print("after", torch.__version__)'
pip install --no-index --disable-pip-version-check /wheels/plain_helper-1.0-py3-none-any.whl; echo "plain-rc=$?"
python -c 'import plain_helper; print("imported", plain_helper.__version__)'
torch-smoke --json --only pip_constraint > /tmp/smoke.json; echo "smoke-rc=$?"; cat /tmp/smoke.json
"""


@pytest.fixture(scope="module")
def runtime(docker_client: docker.DockerClient, base_image: str, wheelhouse: Path,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The example's runtime image, under a name of its own (runs never share it)."""
    tmp = tmp_path_factory.mktemp("constraint-image")
    example = (ROOT / "examples" / "local.yaml").read_text()
    assert "image: pytorch\n" in example and "flavor: [runtime, devel]" in example
    matrix, report = tmp / "matrix.yaml", tmp / "report.json"
    matrix.write_text(example.replace("image: pytorch\n", f"image: constraint{uuid.uuid4().hex[:8]}\n")
                      .replace("flavor: [runtime, devel]", "flavor: [runtime]"))
    proc = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--quiet",
                       "--report", str(report))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    ref = str(json.loads(report.read_text())["images"][0]["local_image"])
    yield ref
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(ref)


def test_pip_cannot_replace_the_images_torch(docker_client: docker.DockerClient, runtime: str, tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    synthwheels.wheel(wheels, "needs-old-torch", "1.0", ["torch==2.0.0"])
    synthwheels.wheel(wheels, "plain-helper", "1.0")
    code, out, err = run_captured(docker_client, runtime, ["sh", "-c", SCRIPT], timeout=300, network_mode="none",
                                  volumes={str(wheels): {"bind": "/wheels", "mode": "ro"}})
    both = out + err
    assert code == 0, both
    assert "before 2.13.0+cpu" in out and "after 2.13.0+cpu" in out  # torch is still the image's
    assert "old-rc=1" in out, both
    assert "The conflict is caused by:" in both and "needs-old-torch 1.0 depends on torch==2.0.0" in both
    assert "The user requested (constraint) torch==2.13.0+cpu" in both
    assert "plain-rc=0" in out and "imported 1.0" in out, both
    report = json.loads(out[out.index("{"):])
    [check] = [r for r in report["results"] if r["name"] == "pip_constraint"]
    assert check["status"] == "pass" and check["detail"].startswith(
        "in force: PIP_CONSTRAINT=/opt/rif/constraints.txt pins torch==2.13.0+cpu"), check
    assert check["detail"].endswith("UV_CONSTRAINT too")


def test_the_constraint_is_lifted_on_purpose_for_one_command(docker_client: docker.DockerClient,
                                                              runtime: str) -> None:
    code, out, err = run_captured(docker_client, runtime, ["sh", "-c", "cat /opt/rif/constraints.txt; env"],
                                  timeout=120, network_mode="none")
    assert code == 0, out + err
    assert "torch==2.13.0+cpu" in out and "PIP_CONSTRAINT= pip install" in out
    assert "PIP_CONSTRAINT=/opt/rif/constraints.txt" in out and "UV_CONSTRAINT=/opt/rif/constraints.txt" in out
