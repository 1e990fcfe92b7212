"""Where registry credentials come from: the environment first, then the Docker config and its helpers."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from builder.registry import credentials


def test_environment_wins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RIF_REGISTRY_USER", "ci")
    monkeypatch.setenv("RIF_REGISTRY_PASSWORD", "tok")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    found = credentials.lookup("ghcr.io/org")
    assert found is not None and (found.username, found.password) == ("ci", "tok")
    assert "tok" not in repr(found) and "tok" not in found.describe()


def test_docker_config_auths(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    auth = base64.b64encode(b"alice:p:ss").decode()
    (tmp_path / "config.json").write_text(json.dumps({"auths": {"127.0.0.1:5000": {"auth": auth}}}))
    found = credentials.lookup("127.0.0.1:5000/rocm")
    assert found is not None and (found.username, found.password) == ("alice", "p:ss")
    assert credentials.lookup("ghcr.io/other") is None


def test_docker_credential_helper(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir()
    helper.write_text('#!/bin/sh\nread host\necho "{\\"Username\\": \\"bob\\", \\"Secret\\": \\"s-$host\\"}"\n')
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "config.json").write_text(json.dumps({"credHelpers": {"ghcr.io": "fake"}}))
    found = credentials.lookup("ghcr.io/org")
    assert found is not None and (found.username, found.password) == ("bob", "s-ghcr.io")
    assert "credential helper 'fake'" in found.source


def _helper(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str) -> None:
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.delenv("RIF_REGISTRY_PASSWORD", raising=False)
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    helper = tmp_path / "bin" / "docker-credential-fake"
    helper.parent.mkdir(exist_ok=True)
    helper.write_text("#!/bin/sh\n" + script)
    helper.chmod(helper.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{helper.parent}{os.pathsep}{os.environ['PATH']}")
    (tmp_path / "config.json").write_text(json.dumps({"credHelpers": {"ghcr.io": "fake"}}))


@pytest.mark.parametrize(("script", "message"), [
    ("echo 'store locked' >&2; exit 3\n", "failed for ghcr.io (exit 3)"),
    ("echo '<html>nope</html>'\n", "not its JSON"),
    ('echo \'{"User": "x"}\'\n', "not its JSON"),
    ("sleep 30\n", "did not answer for ghcr.io within"),
])
def test_a_broken_credential_helper_gets_a_clear_message(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path, script: str, message: str) -> None:
    _helper(tmp_path, monkeypatch, script)
    monkeypatch.setattr(credentials, "HELPER_TIMEOUT_S", 1.0)
    with pytest.raises(credentials.CredentialError) as exc:
        credentials.lookup("ghcr.io/org")
    assert message in str(exc.value) and "docker-credential-fake" in str(exc.value)


def test_a_helper_without_credentials_for_the_host_means_none(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    _helper(tmp_path, monkeypatch, "echo 'credentials not found in native keychain'; exit 1\n")
    assert credentials.lookup("ghcr.io/org") is None


def test_a_missing_helper_program_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _helper(tmp_path, monkeypatch, "exit 0\n")
    (tmp_path / "config.json").write_text(json.dumps({"credsStore": "absent"}))
    with pytest.raises(credentials.CredentialError, match="docker-credential-absent"):
        credentials.lookup("ghcr.io/org")


@pytest.mark.parametrize("only", ["RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"])
def test_only_one_of_the_two_variables_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                    only: str) -> None:
    monkeypatch.delenv("RIF_REGISTRY_USER", raising=False)
    monkeypatch.delenv("RIF_REGISTRY_PASSWORD", raising=False)
    monkeypatch.setenv(only, "value-123")
    with pytest.raises(credentials.CredentialError) as exc:
        credentials.lookup("ghcr.io/org")
    assert "go together" in str(exc.value) and "value-123" not in str(exc.value)
