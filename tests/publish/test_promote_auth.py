"""The whole publish, twice, against real registries of every auth kind: anonymous, htpasswd (Basic), token.

Real on both sides: the distribution registry checks every request, the factory's client and dockerd's
pushes authenticate as the registry asks (the token kind: Bearer tokens from tests.fakes.registries.TokenServer,
which grants exactly the scope asked for and expires its tokens within a minute).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from builder.registry.client import RegistryClient
from builder.registry.credentials import Credentials
from tests.fakes.registries import Registry, TokenServer, need_docker_registry, write_htpasswd
from tests.publish.test_promote import DEVEL, MATRIX, RUNTIME, image_tags, publish

pytestmark = pytest.mark.docker

USER = "alice"
SECRET = f"tok-{uuid.uuid4().hex}"


@dataclass
class AuthRegistry:
    kind: str
    registry: Registry
    env: dict[str, str]
    token: TokenServer | None = None

    def api(self) -> RegistryClient:
        creds = Credentials(USER, SECRET, "test") if self.env else None
        return RegistryClient(self.registry.address, creds)


def start(kind: str, root: Path) -> AuthRegistry:
    if kind == "anonymous":
        return AuthRegistry(kind, Registry(root).start(), {})
    env = {"RIF_REGISTRY_USER": USER, "RIF_REGISTRY_PASSWORD": SECRET}
    if kind == "htpasswd":
        return AuthRegistry(kind, Registry(root, write_htpasswd(root / "htpasswd", USER, SECRET)).start(), env)
    token = TokenServer(root, USER, SECRET).start()
    return AuthRegistry(kind, Registry(root, token=token).start(), env, token)


@pytest.fixture(params=["anonymous", "htpasswd", "token"])
def auth_registry(request: pytest.FixtureRequest, tmp_path: Path,
                  docker_client: docker.DockerClient) -> Iterator[AuthRegistry]:
    need_docker_registry()
    reg = start(request.param, tmp_path)
    yield reg
    reg.registry.close()
    if reg.token is not None:
        reg.token.stop()


@pytest.fixture
def token_registry(tmp_path: Path, docker_client: docker.DockerClient) -> Iterator[AuthRegistry]:
    need_docker_registry()
    reg = start("token", tmp_path)
    yield reg
    reg.registry.close()
    assert reg.token is not None
    reg.token.stop()


def test_publish_twice_publishes_then_skips(auth_registry: AuthRegistry, base_image: str, wheelhouse: Path,
                                            tmp_path: Path) -> None:
    target = f"{auth_registry.registry.address}/team"
    repo = "team/pytorch"
    api = auth_registry.api()

    first = publish(MATRIX, target, wheelhouse, tmp_path, auth_registry.env)
    assert first.proc.returncode == 0, first.output
    assert {k: v["state"] for k, v in first.record.items()} == {RUNTIME: "published", DEVEL: "published"}
    for tag, cell in first.record.items():
        # Every readable tag points at its immutable tag's digest, the one the run recorded.
        assert api.digest(repo, tag) == api.digest(repo, str(cell["immutable_tag"])) == cell["digest"] is not None
    assert api.digest(repo, "latest") == first.record[RUNTIME]["digest"]
    digests = {tag: api.digest(repo, tag) for tag in image_tags(api, repo)}
    assert set(digests) == {RUNTIME, DEVEL, "latest"} | {str(c["immutable_tag"]) for c in first.record.values()}

    again = publish(MATRIX, target, wheelhouse, tmp_path, auth_registry.env)
    assert again.proc.returncode == 0, again.output
    assert {k: (v["state"], v["pushed"], v["moved"]) for k, v in again.record.items()} == {
        RUNTIME: ("skipped", False, []), DEVEL: ("skipped", False, [])}
    assert {tag: api.digest(repo, tag) for tag in image_tags(api, repo)} == digests
    assert SECRET not in first.output + again.output + json.dumps(first.record) + json.dumps(again.record)

    if auth_registry.token is not None:
        # Reads asked for `pull`, writes (the factory's tag moves, dockerd's pushes) for push; nothing else.
        scopes = {s for grant in auth_registry.token.grants for s in grant.scopes}
        assert f"repository:{repo}:pull" in scopes
        assert scopes & {f"repository:{repo}:pull,push", f"repository:{repo}:push,pull"}
        # Only pull beside that: dockerd asks to pull from repositories it knows a layer from on this registry
        # (cross-repository mounts; containerd's store remembers earlier registries on a reused port too).
        assert all(s.startswith(f"repository:{repo}:") or s.endswith(":pull") for s in scopes), scopes
        assert {grant.account for grant in auth_registry.token.grants} == {USER}
        assert auth_registry.token.refused == 0


def test_token_registry_refuses_a_wrong_password_before_any_build(
        token_registry: AuthRegistry, base_image: str, wheelhouse: Path, tmp_path: Path) -> None:
    assert token_registry.token is not None
    target = f"{token_registry.registry.address}/team"
    wrong = publish(MATRIX, target, wheelhouse, tmp_path,
                    {"RIF_REGISTRY_USER": USER, "RIF_REGISTRY_PASSWORD": "not-the-password"})
    assert wrong.proc.returncode == 1, wrong.output
    assert "==> build" not in wrong.proc.stdout and "Traceback" not in wrong.proc.stderr
    assert f"'{USER}'" in wrong.proc.stderr and "refused" in wrong.proc.stderr, wrong.proc.stderr
    assert {k: v["state"] for k, v in wrong.record.items()} == {RUNTIME: "not-attempted", DEVEL: "not-attempted"}
    assert "not-the-password" not in wrong.output + json.dumps(wrong.record)
    assert token_registry.token.refused >= 1 and token_registry.token.grants == []
