"""End to end on the real engine and registry: build, validate, push; a broken cell never reaches the registry."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import docker
import pytest

from builder.core.tags import HASH_LABEL, REFERRERS_TAG_RE
from builder.registry.client import RegistryClient
from testkit import synthwheels
from testkit.matrices import BARE_TORCH, cpu_matrix
from tests.fakes.checkout import DATA, builder_cli

pytestmark = pytest.mark.docker


def images(tags: list[str]) -> list[str]:
    """The tags that name images: an SBOM's referrers-fallback tag (sha256-<hex>) names an index of artifacts."""
    return sorted(t for t in tags if not REFERRERS_TAG_RE.fullmatch(t))

GOOD = ["cpu_debian12_py3.11_torch2.13.0_runtime", "cpu_debian12_py3.11_torch2.13.0_devel"]
BROKEN = "cpu_debian12_py3.11_torch2.13.0_broken"


@pytest.fixture(scope="module")
def e2e_run(docker_client: docker.DockerClient, base_image: str, wheelhouse: Path, registry: str,
            tmp_path_factory: pytest.TempPathFactory) -> tuple[object, list[dict[str, object]], str]:
    namespace = f"{registry}/e2e{uuid.uuid4().hex[:10]}"
    report = tmp_path_factory.mktemp("e2e") / "report.json"
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--wheelhouse", str(wheelhouse),
                       "--push", "--registry", namespace, "--report", str(report), "--quiet")
    return proc, json.loads(report.read_text())["images"], namespace


def test_build_exits_1_because_one_cell_failed(e2e_run: tuple) -> None:  # type: ignore[type-arg]
    proc, rows, _ = e2e_run
    assert proc.returncode == 1, proc.stdout + proc.stderr
    status = {r["tag"]: (r["state"], r["failed_stage"]) for r in rows}
    assert status == {GOOD[0]: ("published", None), GOOD[1]: ("published", None), BROKEN: ("failed", "validate")}


def test_broken_cell_fails_on_the_torch_version(e2e_run: tuple) -> None:  # type: ignore[type-arg]
    proc, rows, _ = e2e_run
    broken = next(r for r in rows if r["tag"] == BROKEN)
    failed = {c["name"] for c in broken["validation"] if c["status"] == "fail"}
    assert failed == {"torch_is_the_expected_version", "torch_version"}
    assert "2.12.0" in proc.stderr and BROKEN in proc.stderr


def test_registry_has_good_cells_with_their_digests_and_not_the_broken_one(e2e_run: tuple) -> None:  # type: ignore[type-arg]
    _, rows, namespace = e2e_run
    address, ns = namespace.split("/", 1)
    client = RegistryClient(address)
    good = [r for r in rows if r["tag"] in GOOD]
    # build --push promotes like publish: immutable tags, the cells' tags and `latest` (the newest runtime).
    assert images(client.tags(f"{ns}/pytorch")) == sorted([*GOOD, "latest", *(str(r["immutable_tag"]) for r in good)])
    runtime = next(r for r in good if r["tag"] == GOOD[0])
    assert client.digest(f"{ns}/pytorch", "latest") == runtime["digest"] and "latest" in runtime["moved"]
    for row in good:
        assert "torch==2.13.0+cpu" in row["packages"] and any(p.startswith("numpy==") for p in row["packages"])
        for tag in (str(row["tag"]), str(row["immutable_tag"])):
            assert client.digest(f"{ns}/pytorch", tag) == row["digest"]
            labels = client.config_labels(f"{ns}/pytorch", tag)
            assert labels[HASH_LABEL] == row["content_hash"]
    assert client.digest(f"{ns}/pytorch", BROKEN) is None


def test_images_import_torch(e2e_run: tuple, docker_client: docker.DockerClient) -> None:  # type: ignore[type-arg]
    _, rows, _ = e2e_run
    for row in rows:
        code = "import torch; print(torch.__version__)"
        out = docker_client.containers.run(str(row["local_image"]), ["python", "-c", code], remove=True)
        assert out.decode().strip() == "2.13.0+cpu"


def test_builder_test_passes_a_good_image_and_fails_the_broken_one(e2e_run: tuple) -> None:  # type: ignore[type-arg]
    _, rows, _ = e2e_run
    image = {r["tag"]: str(r["local_image"]) for r in rows}
    good = builder_cli("test", image[GOOD[0]])
    assert good.returncode == 0, good.stdout + good.stderr
    bad = builder_cli("test", image[BROKEN])
    assert bad.returncode == 1
    assert "torch 2.13.0+cpu is installed, the image promises 2.12.0" in bad.stderr


def test_builder_push_refuses_an_image_that_fails_validation(e2e_run: tuple, namespace: str,  # type: ignore[type-arg]
                                                             tmp_path: Path) -> None:
    _, rows, _ = e2e_run
    image = {r["tag"]: str(r["local_image"]) for r in rows}
    report = tmp_path / "push.json"
    proc = builder_cli("push", image[BROKEN], image[GOOD[1]], "--registry", namespace, "--report", str(report))
    assert proc.returncode == 1
    address, ns = namespace.split("/", 1)
    [broken, devel] = json.loads(report.read_text())["images"]
    assert (broken["state"], broken["failed_stage"], broken["pushed"]) == ("failed", "validate", False)
    # The devel image's pass from the build is taken (its labels agree with the cell.json read back from it: the
    # same checks would say the same); the broken one's failure was never kept, so its checks ran again.
    assert devel["state"] == "published" and devel["validation_reused"] and not broken.get("validation_reused")
    assert images(RegistryClient(address).tags(f"{ns}/pytorch")) == sorted([GOOD[1], devel["immutable_tag"]])


def test_failed_build_is_reported_with_its_log_and_later_cells_still_build(
        docker_client: docker.DockerClient, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    # The failing cell comes first: its torch 2.12.0 wheel is there by name (the preflight passes) but no zip, so
    # pip fails inside its build. Its own image name: the other wheelhouse gives the good cell another content hash,
    # and that build (removed after this test) must not take the name the module's e2e_run image goes by.
    matrix = tmp_path / "m.yaml"
    matrix.write_text(cpu_matrix("{version: '2.12.0', torchvision: null, torchaudio: null}", BARE_TORCH,
                                 image="failedbuild"))
    broken = synthwheels.with_a_corrupt_wheel(wheelhouse, tmp_path / "wheels")
    nowheel = "cpu_debian12_py3.11_torch2.12.0_runtime"
    report = tmp_path / "r.json"
    proc = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(broken), "--report", str(report),
                       "--quiet")
    assert proc.returncode == 1
    rows = [(r["tag"], r["state"], r["failed_stage"]) for r in json.loads(report.read_text())["images"]]
    assert rows == [(nowheel, "failed", "build"), (GOOD[0], "validated", None)]
    assert f"build failed {nowheel}" in proc.stderr
    assert "torch-2.12.0" in proc.stderr  # pip's own words about the wheel, from the tail of the build log


def test_a_wheel_missing_from_the_wheelhouse_stops_the_run_before_any_bake(
        docker_client: docker.DockerClient, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    matrix = tmp_path / "m.yaml"
    matrix.write_text(cpu_matrix("{version: '2.12.0', torchvision: null, torchaudio: null}", BARE_TORCH,
                                 image="pytorch"))
    report = tmp_path / "r.json"
    proc = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(wheelhouse), "--report", str(report),
                       "--quiet")
    assert proc.returncode == 2, proc.stderr
    assert "lacks torch==2.12.0 for cp311" in proc.stderr
    assert f"builder wheelhouse --matrix {matrix} --dest {wheelhouse} --cell cpu_debian12_py3.11_torch2.12.0_runtime" \
        in " ".join(proc.stderr.split())
    assert "#1 [internal]" not in proc.stdout + proc.stderr  # BuildKit never started
    rows = [(r["tag"], r["state"]) for r in json.loads(report.read_text())["images"]]
    assert rows == [("cpu_debian12_py3.11_torch2.12.0_runtime", "not-attempted"), (GOOD[0], "not-attempted")]


def test_unreachable_registry_fails_the_push_before_any_image_is_touched(e2e_run: tuple) -> None:  # type: ignore[type-arg]
    _, rows, _ = e2e_run
    image = next(str(r["local_image"]) for r in rows if r["tag"] == GOOD[0])
    proc = builder_cli("push", image, "--registry", "127.0.0.1:9/nowhere")  # nothing listens on port 9
    assert proc.returncode == 1
    assert "error: registry:" in proc.stderr and "127.0.0.1:9" in proc.stderr and "Connection refused" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cells_with_the_same_content_are_built_once_and_tagged_for_each(
        docker_client: docker.DockerClient, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    """pytorch.org wheels carry every gfx target: per-family pytorch cells are one image, built once."""
    matrix = tmp_path / "m.yaml"
    matrix.write_text("matrix:\n  os: [debian-12]\n  platform: [rocm7.2]\n"
                      "  torch:\n    - {version: '2.13.0', torchvision: null, torchaudio: null}\n"
                      "  gfx: [gfx94X-dcgpu, gfx120X-all, all]\n")
    report = tmp_path / "r.json"
    # Small stand-ins for pytorch.org's rocm7.2 wheels, whose local version the cell pins (+rocm7.2): the test is
    # about which images are built, so --no-validate (no real torch imports from them).
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    synthwheels.wheel(wheels, "torch", "2.13.0+rocm7.2")
    synthwheels.wheel(wheels, "numpy", "2.4.6")
    proc = builder_cli("build", "--matrix", str(matrix), "--wheelhouse", str(wheels), "--no-validate",
                       "--report", str(report), "--quiet")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    [row] = json.loads(report.read_text())["images"]
    assert row["tag"] == "rocm7.2_debian12_py3.11_torch2.13.0_all_runtime"
    assert row["tags"] == ["rocm7.2_debian12_py3.11_torch2.13.0_gfx94X-dcgpu_runtime",
                           "rocm7.2_debian12_py3.11_torch2.13.0_gfx120X-all_runtime", row["tag"], "latest"]
    assert proc.stdout.count("==> build") == 1
