"""hip_compile against a real HIP compiler: Debian trixie's `hipcc` (HIP 5.7 on clang 17), in test-only images.

AMD's repositories are not reachable here, Debian's mirror is: a debootstrapped trixie base (`builder base
debian-13`) gets python3 (the image without a compiler) and then `hipcc libamdhip64-dev` and hipBLAS's headers
(the image with one). hipBLAS's headers come from its -dev package unpacked alone: its library pulls in
librocblas0, 2.2 GB of kernels that compiling does not need. Torch is not installed (no trixie wheels come
from a container here), so the extension part reports it was not built and the kernel compile decides.
The images are cached by tag across runs (they take minutes to make); the zipapp and cell.json are mounted.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import docker
import pytest

from builder.buildkit.engine import run_captured
from builder.smoke import PROGRAM, bundle
from tests.fakes.checkout import builder_cli

pytestmark = pytest.mark.docker

BASE = "rif-test/trixie-base:1"
PYTHON = "rif-test/trixie-python:1"
HIPCC = "rif-test/trixie-hipcc:1"
STEPS = {
    PYTHON: "RUN apt-get update && apt-get install -y --no-install-recommends python3 && rm -rf /var/lib/apt/lists/*",
    HIPCC: ("RUN apt-get update && apt-get install -y --no-install-recommends hipcc libamdhip64-dev "
            "&& cd /tmp && apt-get download libhipblas-dev && dpkg-deb -x libhipblas-dev_*.deb / "
            "&& rm -rf /tmp/*.deb /var/lib/apt/lists/*"),
}
# Targets trixie's clang 17 compiles for (rocm-facts.md section 3), and one it does not know.
KNOWN = ["gfx90a", "gfx942", "gfx1100", "gfx1103", "gfx1151"]


def image(client: docker.DockerClient, ref: str, parent: str) -> str:
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        dockerfile = f"FROM {parent}\n{STEPS[ref]}\n".encode()
        # host network: the engine has no bridge (scripts/setup.sh), and apt must reach the mirror
        client.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, rm=True, forcerm=True, network_mode="host")
    return ref


@pytest.fixture(scope="module")
def images(docker_client: docker.DockerClient) -> dict[str, str]:
    try:
        docker_client.images.get(BASE)
    except docker.errors.ImageNotFound:
        builder_cli("base", "debian-13", "--tag", BASE, check=True)
    python = image(docker_client, PYTHON, BASE)
    return {"python": python, "hipcc": image(docker_client, HIPCC, python)}


def cell(**changes: Any) -> dict[str, Any]:
    base = {"tag": "rocm7.2_debian13_py3.13_torch2.13.0_gfx-test_devel", "platform": "rocm7.2",
            "channel": "pytorch", "os": "debian-13", "flavor": "devel", "python": "3.13", "user": "root",
            "torch": "2.13.0", "torchvision": None, "torchaudio": None, "hip": "7.2", "gfx_family": "test",
            "gfx_targets": ["gfx942", "gfx1100"], "rocm_sdk": True}
    return {**base, **changes}


def hip_compile(client: docker.DockerClient, ref: str, tmp: Path, expect: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """`torch-smoke --only hip_compile --json` in the image, with the zipapp and the cell mounted read-only."""
    (tmp / PROGRAM).write_bytes(bundle())
    (tmp / "cell.json").write_text(json.dumps(expect))
    code, out, err = run_captured(
        client, ref, ["python3", f"/rif/{PROGRAM}", "--json", "--cell", "/rif/cell.json", "--only", "hip_compile"],
        timeout=600, volumes={str(tmp): {"bind": "/rif", "mode": "ro"}})
    report = json.loads(out) if out.strip() else {"stderr": err}
    assert [r["name"] for r in report["results"]] == ["hip_compile"], report
    return code, report["results"][0]


def test_trixie_hipcc_compiles_the_kernel_for_every_target(docker_client: docker.DockerClient,
                                                           images: dict[str, str], tmp_path: Path) -> None:
    code, result = hip_compile(docker_client, images["hipcc"], tmp_path, cell(gfx_targets=KNOWN))
    assert (code, result["status"]) == (0, "pass"), result
    assert result["detail"].startswith(
        "hipcc (HIP 5.7.31921-0, clang 17.0.6) compiled a kernel for gfx90a, gfx942, gfx1100, gfx1103, gfx1151 "
        "with hip/hip_runtime.h and hipblas/hipblas.h; load_inline extension not built: torch not importable"), result


def test_a_target_the_compiler_does_not_know_fails_naming_it(docker_client: docker.DockerClient,
                                                             images: dict[str, str], tmp_path: Path) -> None:
    code, result = hip_compile(docker_client, images["hipcc"], tmp_path,
                               cell(gfx_targets=["gfx942", "gfx950"]))
    assert (code, result["status"]) == (1, "fail"), result
    assert result["detail"].startswith("hipcc (HIP 5.7.31921-0, clang 17.0.6) compiled a kernel for gfx942; gfx950: "
                                       "the compiler (HIP 5.7.31921-0, clang 17.0.6) does not know this target "
                                       "(clang++-17: error: invalid target ID 'gfx950'"), result
    assert "a ROCm SDK whose compiler knows every target" in result["fix"]


def test_without_a_compiler_a_devel_image_fails_with_the_fix_for_its_channel(
        docker_client: docker.DockerClient, images: dict[str, str], tmp_path: Path) -> None:
    code, result = hip_compile(docker_client, images["python"], tmp_path, cell())
    assert (code, result["status"]) == (1, "fail"), result
    assert result["detail"] == ("no HIP compiler in this image, which promises a ROCm SDK: hipcc is not on PATH, "
                                "in $ROCM_HOME/bin, $ROCM_PATH/bin or /opt/rocm/bin")
    assert result["fix"] == ("install the ROCm SDK for ROCm 7.2 from AMD's apt repository: deb "
                             "https://repo.radeon.com/rocm/apt/7.2 trixie main, then apt-get install -y rocm-dev "
                             "(hipcc, HIP and math-library headers)")
    _, therock = hip_compile(docker_client, images["python"], tmp_path, cell(channel="therock"))
    assert therock["status"] == "fail" and 'pip install "rocm[devel]", then `rocm-sdk init`' in therock["fix"]
    code, runtime = hip_compile(docker_client, images["python"], tmp_path, cell(flavor="runtime", rocm_sdk=False))
    assert (code, runtime["status"]) == (0, "skip")
