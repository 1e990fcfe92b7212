"""Every image proven under Apptainer: the example's two images converted to SIFs and torch-smoke run in them as a
non-root user with --containall (from the engine's archive, and from the registry once pulled from it); an image
that needs a writable /opt/venv passes under Docker, fails `builder test --apptainer`, and is never pushed by
`builder build --push --apptainer`.

The runner is made once per engine (a tag from its recipe's hash, not a name the suite reclaims); each conversion
takes one to three minutes on 2 cores, so this module converts four images and no more: the broken image once, its
checks handed to both commands that meet it.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from builder.registry.client import RegistryClient
from builder.validate import apptainer, sifrunner
from builder.validate.runner import Check
from tests.fakes.checkout import ROOT, builder_cli

EXAMPLE = ROOT / "examples" / "local.yaml"
RUNTIME, DEVEL = "cpu_debian12_py3.11_torch2.13.0_runtime", "cpu_debian12_py3.11_torch2.13.0_devel"
DIGEST = "sha256:" + "a" * 64


# -- the commands, without an engine ------------------------------------------------------------------------

def test_only_a_registry_the_image_was_pulled_from_is_a_source() -> None:
    assert apptainer.registry_source([f"rocm-image-factory/pytorch@{DIGEST}"]) is None  # the engine's own name
    assert apptainer.registry_source([f"pytorch@{DIGEST}", f"docker.io/rocm/pytorch@{DIGEST}"]) is None
    pulled = f"127.0.0.1:5000/ns/pytorch@{DIGEST}"
    assert apptainer.registry_source([f"rocm-image-factory/pytorch@{DIGEST}", pulled]) == pulled
    assert apptainer.registry_source([f"ghcr.io/acme/pytorch@{DIGEST}"]) == f"ghcr.io/acme/pytorch@{DIGEST}"


def test_plain_http_only_for_a_loopback_registry_and_the_layout_otherwise() -> None:
    assert apptainer.build_command(None)[-1] == "oci:///work/layout"
    loopback = apptainer.build_command(f"127.0.0.1:5000/ns/pytorch@{DIGEST}")
    assert "--no-https" in loopback and loopback[-1] == f"docker://127.0.0.1:5000/ns/pytorch@{DIGEST}"
    assert "--no-https" not in apptainer.build_command(f"ghcr.io/acme/pytorch@{DIGEST}")


def test_torch_smoke_runs_contained_from_the_sif() -> None:
    command = apptainer.exec_command(["torch-smoke", "--json"])
    assert command[command.index("exec") + 1:] == ["--containall", apptainer.SIF, "torch-smoke", "--json"]


# -- on the engine and the registry ----------------------------------------------------------------------------

def checks(row: dict[str, Any], suite: str) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in row["validation"] if c["suite"] == suite}


@pytest.fixture(scope="module")
def runner(docker_client: docker.DockerClient) -> str:
    return sifrunner.ensure(docker_client)


@pytest.fixture(scope="module")
def example(docker_client: docker.DockerClient, base_image: str, wheelhouse: Path, registry: str, runner: str,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, dict[str, dict[str, Any]], str]]:
    """examples/local.yaml built, validated under Docker and Apptainer, and pushed."""
    namespace = f"{registry}/apptainer{uuid.uuid4().hex[:8]}"
    report = tmp_path_factory.mktemp("apptainer") / "report.json"
    proc = builder_cli("build", "--matrix", str(EXAMPLE), "--wheelhouse", str(wheelhouse), "--push", "--registry",
                       namespace, "--apptainer", "--report", str(report), "--quiet")
    rows = {r["tag"]: r for r in json.loads(report.read_text())["images"]}
    # Held under a name no session reclaims (another session's reclaim on a shared engine removes suite names).
    held = f"rif-test/apptainer-example:{uuid.uuid4().hex[:12]}"
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.get(str(rows[RUNTIME]["image_id"])).tag(held)
    yield proc, rows, namespace
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(held)


# Python refuses to start where /opt/venv is not writable: Docker runs the image writable, Apptainer read-only. (A venv
# only root can read does not do: the runner's unprivileged Apptainer mounts the SIF with squashfuse, which does not
# enforce the files' modes, so uid 1000 reads a 0700 /opt/venv there.)
NEEDS_WRITABLE_ROOT = "import os, sys; os.access(sys.prefix, os.W_OK) or sys.exit('needs a writable ' + sys.prefix)\n"


@pytest.fixture(scope="module")
def broken(docker_client: docker.DockerClient, example: tuple[Any, dict[str, dict[str, Any]], str]) -> Iterator[str]:
    """The runtime image plus one layer: a .pth file that stops Python where /opt/venv is read-only. Its name is no
    suite name (another session's reclaim on a shared engine would remove it mid-module): removed here."""
    _, rows, _ = example
    pth = "/opt/venv/lib/python3.11/site-packages/zz_writable_root.pth"
    container = docker_client.containers.run(str(rows[RUNTIME]["image_id"]),  # by ID: a name may be reclaimed
                                             ["sh", "-c", f'printf "%s" "$PTH" > {pth}'], detach=True,
                                             network_mode="none", entrypoint=[],
                                             environment={"PTH": NEEDS_WRITABLE_ROOT})
    try:
        assert container.wait(timeout=120)["StatusCode"] == 0
        image = container.commit("rif-test/apptainer-broken", uuid.uuid4().hex[:12])
    finally:
        container.remove(force=True)
    yield str(image.id)
    with contextlib.suppress(docker.errors.APIError):
        docker_client.images.remove(str(image.id), force=True)


@pytest.mark.docker
@pytest.mark.registry
def test_both_example_images_pass_torch_smoke_under_apptainer_as_a_user(example: tuple[Any, Any, str]) -> None:
    proc, rows, namespace = example
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for tag in (RUNTIME, DEVEL):
        row = rows[tag]
        assert row["state"] == "published", row
        under = checks(row, "apptainer")
        assert under["convert"]["status"] == "pass"
        assert "the engine's archive" in under["convert"]["detail"]  # validated before it was pushed
        assert "uid 1000 with --containall" in under["convert"]["detail"]
        assert not [c for c in under.values() if c["status"] == "fail"], under
        assert {n: under[n]["status"] for n in ("import", "libs", "cpu_matmul", "numpy")} == dict.fromkeys(
            ("import", "libs", "cpu_matmul", "numpy"), "pass")
        assert under["import"]["detail"].startswith("torch 2.13.0+cpu from /opt/venv/")
        config = checks(row, "testinfra")  # the image config suits Apptainer (PATH, VIRTUAL_ENV, no home)
        for name in ("environment_comes_from_the_image_config", "rocm_variables_come_from_the_image_config",
                     "nothing_needed_lives_under_a_home_folder"):
            assert config[name]["status"] == "pass", config[name]
    address, ns = namespace.split("/", 1)
    assert {RUNTIME, DEVEL} <= set(RegistryClient(address).tags(f"{ns}/pytorch"))


@pytest.mark.docker
@pytest.mark.registry
def test_an_image_pulled_from_its_registry_is_converted_from_there(
        docker_client: docker.DockerClient, example: tuple[Any, Any, str]) -> None:
    _, _, namespace = example
    ref = f"{namespace}/pytorch:{RUNTIME}"
    docker_client.images.pull(ref)  # a loopback registry: the engine speaks plain HTTP to it
    proc = builder_cli("test", ref, "--apptainer")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    squeezed = re.sub(r"[\s│]", "", proc.stdout)  # the table wraps its detail column across lines
    assert f"SIFfromdocker://{namespace}/pytorch@sha256:" in squeezed, proc.stdout


@pytest.fixture(scope="module")
def under_apptainer(docker_client: docker.DockerClient, broken: str) -> list[Check]:
    """The broken image converted once, and its checks: the commands below are handed these in place of a
    conversion of their own (each converts the same image the same way: about two minutes on 2 cores)."""
    found = apptainer.run_apptainer(docker_client, broken)
    assert (found[0].name, found[0].status) == ("convert", "pass"), found  # the SIF was made
    failed = [c for c in found if c.status == "fail"]
    assert failed and any("needs a writable /opt/venv" in c.detail for c in failed), found  # and Python stopped
    assert {c.suite for c in found} == {"apptainer"}, found
    return found


def cli(args: list[str]) -> Any:
    """`builder ARGS` in this process (so a test's monkeypatch reaches it), its stdout and stderr apart."""
    from typer.testing import CliRunner

    from builder.cli.app import app
    return CliRunner().invoke(app, args)


@pytest.mark.docker
def test_an_image_that_needs_a_writable_root_fails_builder_test_apptainer_alone(
        broken: str, under_apptainer: list[Check], monkeypatch: pytest.MonkeyPatch) -> None:
    """`builder test --apptainer`: its Docker suites run on the image for real, Apptainer's checks are the module's
    conversion of the very image."""
    asked: list[str] = []
    monkeypatch.setattr(apptainer, "run_apptainer", lambda client, ref: asked.append(ref) or list(under_apptainer))
    result = cli(["test", broken, "--apptainer"])
    assert result.exit_code == 1, result.output
    assert asked == [broken], asked
    failed = re.findall(r"^    (\w+)/(\w+): ", result.stderr, flags=re.MULTILINE)
    assert failed and {suite for suite, _ in failed} == {"apptainer"}, result.stderr  # Docker's checks all pass


@pytest.mark.docker
@pytest.mark.registry
def test_build_push_with_the_opt_in_never_pushes_an_image_that_fails_under_apptainer(
        under_apptainer: list[Check], wheelhouse: Path, namespace: str, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """In process: the Apptainer step gets the broken image's checks instead of the one just built (a fault injected
    where Apptainer reads the image), so the build, its validation under Docker and the push gate are the real ones."""
    monkeypatch.setattr(apptainer, "run_apptainer", lambda client, ref: list(under_apptainer))
    record = tmp_path / "record.json"
    result = cli(["build", "--matrix", str(EXAMPLE), "--cell", RUNTIME, "--wheelhouse", str(wheelhouse), "--push",
                  "--registry", namespace, "--apptainer", "--report", str(record), "--quiet"])
    assert result.exit_code == 1, result.output
    [row] = json.loads(record.read_text())["images"]
    assert (row["state"], row["failed_stage"], row["pushed"]) == ("failed", "validate", False)
    assert not [c for c in row["validation"] if c["status"] == "fail" and c["suite"] != "apptainer"]
    address, ns = namespace.split("/", 1)
    assert RegistryClient(address).tags(f"{ns}/pytorch") == []
