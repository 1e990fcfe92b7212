"""`builder build` and `base`: what is refused before anything is built or pushed."""

from __future__ import annotations

import docker
import pytest

from tests.fakes.checkout import DATA, builder_cli
from tests.fakes.engine import labelled_image


def test_push_without_validation_is_refused() -> None:
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--push", "--registry", "127.0.0.1:1/x",
                       "--no-validate")
    assert proc.returncode == 2
    assert "--no-validate" in proc.stderr and "never pushed" in proc.stderr


def test_push_needs_a_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIF_REGISTRY", raising=False)
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--push")
    assert proc.returncode == 2 and "--registry" in proc.stderr


def test_unknown_cell_filter_is_bad_input() -> None:
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--cell", "nope")
    assert proc.returncode == 2 and "no cell has tag 'nope'" in proc.stderr


@pytest.mark.docker
def test_base_refuses_unknown_and_dnf_os() -> None:
    assert builder_cli("base", "plan9").returncode == 2
    proc = builder_cli("base", "rocky-9")
    assert proc.returncode == 2 and "apt distros only" in proc.stderr


def test_insecure_registry_without_push_does_not_apply() -> None:
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--insecure-registry", "reg.lan:5000")
    assert proc.returncode == 2 and "applies with --push only" in proc.stderr


@pytest.mark.docker
def test_builder_test_pulls_an_image_the_engine_lacks_by_tag_and_by_digest_and_says_the_registry_s_error(
        docker_client: docker.DockerClient, base_image: str, namespace: str) -> None:
    """A small image made here (no public registry is reachable), pushed to the loopback registry and removed from
    the engine: `builder test` pulls it as `docker run` would, then holds it to the factory's contract (this one
    carries no factory label: exit 2 saying so, about the pulled image). A tag the registry lacks: its error, exit 1."""
    ref = f"{namespace}/pulled:t"
    labelled_image(docker_client, base_image, ref, {"org.example.own": "yes"})
    for event in docker_client.images.push(f"{namespace}/pulled", tag="t", stream=True, decode=True):
        assert "error" not in event, event
    [digest] = [d.split("@")[1] for d in docker_client.images.get(ref).attrs["RepoDigests"]]
    for name in (ref, f"{namespace}/pulled@{digest}"):
        docker_client.images.remove(ref)
        with pytest.raises(docker.errors.ImageNotFound):
            docker_client.images.get(name)
        proc = builder_cli("test", name)
        assert proc.returncode == 2, proc.stderr
        assert "was not built by rocm-image-factory" in proc.stderr and "no local image" not in proc.stderr
        assert docker_client.images.get(name).labels == {"org.example.own": "yes"}  # pulled: now in the engine
        docker_client.images.get(name).tag(ref)
    missing = builder_cli("test", f"{namespace}/pulled:nope")
    assert missing.returncode == 1, missing.stderr
    assert f"registry: {namespace.split('/')[0]}: cannot pull {namespace}/pulled:nope" in missing.stderr
    assert "not found" in missing.stderr and "unexpected" not in missing.stderr


def test_base_reads_the_snapshot_mirror_and_apt_trust_from_the_environment_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """RIF_APT_SNAPSHOT and RIF_APT_SNAPSHOT_TRUSTED are read by the command, and handed to builder.buildkit as
    parameters (nothing below builder/cli reads a RIF_* setting); --mirror wins over the environment."""
    from builder.buildkit import baseimage
    from builder.cli import build

    seen: list[tuple[object, ...]] = []
    monkeypatch.setattr(build, "connect", lambda: None)
    monkeypatch.setattr(baseimage, "build_base", lambda os_name, mirror, tag, snapshot, *, trusted:
                        seen.append((mirror, snapshot, trusted)) or "debian:12")
    monkeypatch.setenv("RIF_APT_SNAPSHOT", "http://127.0.0.1:9/archive")
    monkeypatch.setenv("RIF_APT_SNAPSHOT_TRUSTED", "yes")
    build.base("debian-12", None, None, "20261101T000000Z")
    build.base("debian-12", "http://127.0.0.1:8/other", None, "20261101T000000Z")
    build.base("debian-12", None, None, None)  # no snapshot: debootstrap's mirror is the host's, not the archive
    monkeypatch.delenv("RIF_APT_SNAPSHOT_TRUSTED")
    build.base("debian-12", None, None, "20261101T000000Z")
    assert seen == [("http://127.0.0.1:9/archive", "20261101T000000Z", True),
                    ("http://127.0.0.1:8/other", "20261101T000000Z", True), (None, None, True),
                    ("http://127.0.0.1:9/archive", "20261101T000000Z", False)]


def test_the_snapshot_mirror_below_the_command_line_is_the_one_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from builder.buildkit import baseimage
    from builder.core import facts

    monkeypatch.setenv("RIF_APT_SNAPSHOT", "http://127.0.0.1:9/archive")
    release = facts.os_releases()["debian-12"]
    assert baseimage.snapshot_mirror(release, None, "20261101T000000Z") == (
        f"{release.snapshot[0].archive.rstrip('/')}/20261101T000000Z/")
