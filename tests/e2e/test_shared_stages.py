"""The first wave for real: `builder stages` builds the stages two combinations share once into a
registry cache, a second wave finds them there, and a job's bake imports them (real engine, real registry)."""

from __future__ import annotations

import json
import urllib.request
import uuid
from pathlib import Path

import docker
import pytest

from builder.buildkit.bake import HOST
from builder.buildkit.export import Cache
from builder.pipeline import jobs, lifecycle
from builder.pipeline.options import BakeOptions
from builder.render import sharedstages
from builder.render.sources import WheelSource
from testkit.synthwheels import therock_like
from tests.fakes.checkout import builder_cli

pytestmark = pytest.mark.docker

TORCH = "{version: '2.13.0', torchvision: null, torchaudio: null}"
MATRIX = """image: IMAGE
matrix:
  os: [debian-12]
  platform: [rocm7.1, rocm7.2]
  torch: [TORCH]
  gfx: [gfx94X-dcgpu]
  channel: [local]
  flavor: [runtime]
"""


def test_the_shared_stages_are_built_once_into_the_cache_and_every_job_imports_them(
        tmp_path: Path, base_image: str, namespace: str, docker_client: docker.DockerClient) -> None:
    therock_like(tmp_path / "wheels", ["gfx942"], salt=uuid.uuid4().hex.encode())  # bytes no cache has seen
    matrix = tmp_path / "m.yaml"
    matrix.write_text(MATRIX.replace("IMAGE", f"t-stages-{uuid.uuid4().hex[:8]}").replace("TORCH", TORCH))
    source = WheelSource(wheelhouse=tmp_path / "wheels")
    todo = jobs.matrix_jobs(matrix, None, None, source)
    shared = sharedstages.shared([j.rendered for j in todo if j.rendered is not None])
    assert sorted(s.stage for s in shared) == ["base", "torch"]  # two ROCm lines over one wheelhouse

    args = ["stages", "--matrix", str(matrix), "--wheelhouse", str(tmp_path / "wheels"), "--cache-registry",
            namespace]
    first = builder_cli(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    for s in shared:
        assert f"built {s.key} ({s.stage} of 2 combinations" in first.stdout
    host, _, path = namespace.partition("/")
    with urllib.request.urlopen(f"http://{host}/v2/{path}/buildcache/tags/list", timeout=30) as answer:
        assert set(json.load(answer)["tags"]) == {s.key for s in shared}  # cache only: no image, no other tag
    second = builder_cli(*args)
    assert second.returncode == 0, second.stdout + second.stderr

    # A job of one combination imports the stages from there (its own cache is still empty).
    lines: list[str] = []
    one = [j for j in todo if j.tag.startswith("rocm7.2")]
    options = BakeOptions(source=source, cache=Cache(f"{namespace}/buildcache", insecure=True),
                          buildkit=HOST)  # the tests' engine has no bridge
    events = lifecycle.Events(line=lambda tag, text: lines.append(text))
    prepared = lifecycle.prepare(docker_client, one, options, events)
    assert all(r.ok for r in prepared.built.values()), lines[-20:]
    for s in shared:
        assert f"importing cache manifest from {namespace}/buildcache:{s.key}" in "\n".join(lines)
