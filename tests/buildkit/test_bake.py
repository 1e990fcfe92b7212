"""BuildKit at ROCm's scale, on the real engine: devel over runtime, families over one torch stage, no wheel
in any layer, each wheel downloaded once per machine, and the committed bake file usable without Python."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from builder.buildkit.bake import host_network
from builder.render.dockerfile import bake_target
from testkit.matrices import write_matrix
from testkit.synthwheels import WheelIndex, therock_like
from tests.fakes.checkout import DATA, ROOT, builder_cli
from tests.fakes.engine import saved_image

pytestmark = pytest.mark.docker

TARGETS = ["gfx942", "gfx1151", "gfx1200", "gfx1201"]
FAMILIES = ("image: {image}\nmatrix:\n  os: [debian-12]\n  platform: [rocm7.2]\n"
            "  torch:\n    - {{version: '2.13.0', torchvision: null, torchaudio: null}}\n"
            "  gfx: [{gfx}]\n  channel: [local]\n  flavor: [{flavors}]\n")


def tag(gfx: str, flavor: str) -> str:
    return f"rocm7.2_debian12_py3.11_torch2.13.0_{gfx}_local_{flavor}"


def build(matrix: Path, wheelhouse: Path | None, tmp: Path) -> dict[str, str]:
    """builder build --no-validate (synthetic torch cannot pass torch-smoke): image tag -> image ID."""
    report = tmp / f"report-{uuid.uuid4().hex[:6]}.json"
    args = ["--wheelhouse", str(wheelhouse)] if wheelhouse else []
    proc = builder_cli("build", "--matrix", str(matrix), *args, "--no-validate", "--quiet", "--report", str(report))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return {row["tag"]: row["image_id"] for row in json.loads(report.read_text())["images"]}


def remove(client: docker.DockerClient, image: str) -> None:
    for found in client.images.list(name=f"rocm-image-factory/{image}"):
        client.images.remove(found.id, force=True)


@pytest.fixture(scope="module")
def families(docker_client: docker.DockerClient, base_image: str,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, docker.models.images.Image]]:
    tmp = tmp_path_factory.mktemp("families")
    # Wheels of their own bytes: the layout is judged on its own build, never on layers an earlier run left
    # in BuildKit's cache (partly trimmed, and not byte-reproducible on BuildKit 0.8).
    therock_like(tmp / "wh", TARGETS, salt=uuid.uuid4().bytes)
    image = f"synth{uuid.uuid4().hex[:8]}"
    # Three families' runtimes, two families' devels: a devel image's own steps (its apt packages) cost half a
    # minute each, and two show what one devel over its family's runtime is as well as three would.
    matrix = write_matrix(tmp, FAMILIES.format(image=image, gfx="gfx94X-dcgpu, gfx1151, gfx120X-all",
                                               flavors="runtime, devel") +
                          "exclude:\n  - {gfx: gfx1151, flavor: devel}\n")
    ids = build(matrix, tmp / "wh", tmp)
    yield {t: docker_client.images.get(i) for t, i in ids.items()}
    remove(docker_client, image)


def layers(image: docker.models.images.Image) -> list[str]:
    return list(image.attrs["RootFS"]["Layers"])


def test_devel_layers_start_with_runtime_layers(families: dict[str, docker.models.images.Image]) -> None:
    for gfx in ("gfx94X-dcgpu", "gfx120X-all"):
        runtime, devel = layers(families[tag(gfx, "runtime")]), layers(families[tag(gfx, "devel")])
        assert devel[:len(runtime)] == runtime and len(devel) > len(runtime), gfx


def test_family_images_share_every_layer_below_their_device_packages(
        families: dict[str, docker.models.images.Image], base_image: str, docker_client: docker.DockerClient) -> None:
    runtimes = [layers(families[tag(g, "runtime")]) for g in ("gfx94X-dcgpu", "gfx1151", "gfx120X-all")]
    shared = len(layers(docker_client.images.get(base_image))) + 4  # + apt/venv, groups, torch, torch's deps
    assert all(r[:shared] == runtimes[0][:shared] for r in runtimes)
    device = [r[shared] for r in runtimes]
    assert len(set(device)) == 3  # each family's own device layer, and only from there on do they differ


def _layer_names(client: docker.DockerClient, image_id: str) -> Iterator[tuple[str, str]]:
    """(layer, path) for every entry of every layer."""
    return ((blob, entry.name) for blob, entry, _ in saved_image(client, image_id) if entry is not None)


def test_no_layer_of_any_image_holds_a_wheel_or_a_pip_cache(families: dict[str, docker.models.images.Image],
                                                           docker_client: docker.DockerClient) -> None:
    for name in (tag("gfx94X-dcgpu", "devel"), tag("gfx120X-all", "devel")):  # devel holds every runtime layer
        paths = list(_layer_names(docker_client, families[name].id))
        assert any(p.endswith("payload.bin") for _, p in paths)  # the scan sees the installed packages
        bad = [(layer, p) for layer, p in paths if p.endswith(".whl") or "/.cache/pip" in f"/{p}"
               or p.startswith(("tmp/pip", "mnt/"))]
        assert bad == [], bad


def test_each_wheel_is_downloaded_once_across_cells_and_runs(docker_client: docker.DockerClient, base_image: str,
                                                            tmp_path: Path) -> None:
    therock_like(tmp_path / "wh", TARGETS)
    index = WheelIndex(tmp_path / "wh", "127.0.0.1")  # builds run on the host network: loopback only
    image = f"synth{uuid.uuid4().hex[:8]}"
    try:
        text = FAMILIES + f"index_urls:\n  rocm7.2: {index.url}\n"
        first = write_matrix(tmp_path, text.format(image=image, gfx="gfx94X-dcgpu", flavors="runtime"))
        build(first, None, tmp_path)
        assert set(index.downloads) == {"torch-2.13.0-py3-none-any.whl", "rif_rocm_libraries-1.0-py3-none-any.whl",
                                        "numpy-2.4.6-py3-none-any.whl", "rif_device_gfx942-2.13.0-py3-none-any.whl"}
        second = tmp_path / "second"
        second.mkdir()
        # Another run, other cells: numpy is installed again in new layers, from the pip cache mount (runtime
        # images: a devel image installs no wheel of its own).
        build(write_matrix(second, text.format(image=image, gfx="gfx1151, gfx120X-all", flavors="runtime")), None,
              tmp_path)
        assert index.downloads["rif_device_gfx1151-2.13.0-py3-none-any.whl"] == 1
        assert index.downloads["rif_device_gfx1200-2.13.0-py3-none-any.whl"] == 1
        assert max(index.downloads.values()) == 1, index.downloads
    finally:
        index.close()
        remove(docker_client, image)


def test_committed_bake_file_lists_every_image_and_plain_bake_builds_the_same_layers(
        docker_client: docker.DockerClient, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    printed = subprocess.run(["docker", "buildx", "bake", "-f", "images/docker-bake.json", "--print"], cwd=ROOT,
                             capture_output=True, text=True, check=True)
    committed = {p.parent.name for p in (ROOT / "images" / "cells").glob("*/cell.json")}
    assert set(json.loads(printed.stdout)["target"]) == {bake_target(t) for t in committed}
    # Without Python: render the example's tree once, then bake one target with plain docker buildx bake.
    matrix = DATA.parent.parent / "examples" / "local.yaml"
    ids = build(matrix, wheelhouse, tmp_path)
    runtime = "cpu_debian12_py3.11_torch2.13.0_runtime"
    rendered = builder_cli("render", "--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--out", "tree",
                           cwd=tmp_path)
    assert rendered.returncode == 0, rendered.stderr
    # As README says: SOURCE_DATE_EPOCH=0 and the OCI output give the very manifest (the layers' times are set).
    network = host_network(tmp_path / "tree" / "docker-bake.json", tmp_path, [bake_target(runtime)])  # no bridge
    output = (f"{bake_target(runtime)}.output=type=oci,tar=false,dest={tmp_path / 'layout'},"
              "oci-mediatypes=true,compression=gzip")
    plain = subprocess.run(["docker", "buildx", "bake", "-f", "tree/docker-bake.json", *network, "--progress", "plain",
                            "--allow", f"fs.write={tmp_path / 'layout'}", "--set", output, bake_target(runtime)],
                           cwd=tmp_path, capture_output=True, text=True, check=False,
                           env={**os.environ, "SOURCE_DATE_EPOCH": "0"})
    assert plain.returncode == 0, plain.stdout[-2000:] + plain.stderr[-2000:]
    entries = json.loads((tmp_path / "layout" / "index.json").read_text())["manifests"]  # one per tag
    assert {e["digest"] for e in entries} == {ids[runtime]}  # the engine's image ID is its manifest digest
