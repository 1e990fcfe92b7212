"""The README's "your own matrix" walkthrough, step by step: matrix -> base -> wheelhouse -> build -> run.

Each step runs the command the walkthrough prints (through the real console entry point); where the walkthrough
shows a mistake and its fix (a Debian 13 cell and a wheelhouse of Python 3.11 wheels), the error it quotes.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import docker
import pytest

from builder.buildkit.engine import installed_bytes, run_captured
from builder.core import tags
from tests.fakes.checkout import builder_cli

pytestmark = pytest.mark.docker

TAG = "cpu_debian12_py3.11_torch2.13.0_runtime"
TRIXIE = "cpu_debian13_py3.13_torch2.13.0_runtime"
MY_MATRIX = """\
# my.yaml: one CPU image on Debian 12 with PyTorch 2.13.0 (no companions: PyPI's torchvision would not import
# beside the CPU torch the wheelhouse holds).
image: {image}
matrix:
  os: [debian-12]
  platform: [cpu]
  torch:
    - {{version: "2.13.0", torchvision: null, torchaudio: null}}
  flavor: [runtime]
"""


def test_your_own_matrix_from_base_to_a_running_image(docker_client: docker.DockerClient, base_image: str,
                                                       wheelhouse: Path, tmp_path: Path) -> None:
    image = f"walkthrough{uuid.uuid4().hex[:8]}"
    matrix = tmp_path / "my.yaml"
    matrix.write_text(MY_MATRIX.format(image=image))

    # 1. What the matrix expands to.
    listed = builder_cli("matrix", "--matrix", str(matrix), "--format", "json")
    assert listed.returncode == 0, listed.stderr
    assert [c["tag"] for c in json.loads(listed.stdout)] == [TAG]

    # 2. The base: `builder base debian-12` where nothing can be pulled (the base_image fixture ran it, or pulled).
    assert docker_client.images.get("debian:12")

    # 3. The wheelhouse: every wheel the cell installs, for its Python (3.11) and platform. pip skips the files the
    # shared test wheelhouse already holds.
    fetched = builder_cli("wheelhouse", "--matrix", str(matrix), "--dest", str(wheelhouse), "--use-pip-config")
    assert fetched.returncode == 0, fetched.stderr
    assert list(wheelhouse.glob("torch-2.13.0*-cp311-*.whl"))

    # 4. Build and validate.
    record = tmp_path / "record.json"
    built = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--report", str(record),
                        "--progress", "plain")
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    [row] = json.loads(record.read_text())["images"]
    assert (row["tag"], row["state"]) == (TAG, "validated")
    local = tags.local_ref(image, TAG)
    assert row["image_bytes"] == installed_bytes(docker_client, local)
    assert row["image_bytes"] > int(docker_client.images.get(local).attrs["Size"])  # unpacked > compressed

    # 5. Run it.
    code, out, err = run_captured(docker_client, local, ["python", "-c", "import torch; print(torch.__version__)"])
    assert code == 0, err
    assert out.strip().startswith("2.13.0")
    code, out, err = run_captured(docker_client, local, ["torch-smoke"])
    assert code == 0, out + err

    # The walkthrough's mistake: a Debian 13 cell (Python 3.13) with the same wheelhouse (cp311 wheels only) stops
    # in seconds, before any bake, naming the missing wheels and the command that fetches them.
    trixie = tmp_path / "trixie.yaml"
    trixie.write_text(MY_MATRIX.format(image=image).replace("[debian-12]", "[debian-13]"))
    refused = builder_cli("build", "--matrix", str(trixie), "--wheelhouse", str(wheelhouse), "--progress", "plain")
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    said = " ".join(refused.stderr.split())
    assert f"{TRIXIE}: wheelhouse: {wheelhouse} lacks torch==2.13.0 for cp313" in said
    assert f"`builder wheelhouse --matrix {trixie} --dest {wheelhouse} --cell {TRIXIE}`" in said
    if "base image" in said:  # no debian:13 in the engine and no registry serving it: the base's own line
        assert "debian:13 is not in the local engine" in said and "`builder base debian-13`" in said
    assert "#1 [internal]" not in refused.stdout + refused.stderr  # BuildKit never started
