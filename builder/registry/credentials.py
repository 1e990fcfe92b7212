"""Registry credentials, from the environment or the Docker config; never from the repository.

The Docker config (auths, credHelpers, credsStore) is parsed by the docker SDK (`docker.auth`). The
helper itself is run here with a time limit: the SDK's credential store waits on a helper forever, and
a hung `docker-credential-*` must not hang a scheduled publish. The password never leaves this
module's objects in printable form: errors name the user and where the credentials came from.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from docker import auth as docker_auth

HELPER_TIMEOUT_S = 30.0
ENV_USER, ENV_PASSWORD = "RIF_REGISTRY_USER", "RIF_REGISTRY_PASSWORD"
NONE_FOUND = f"no credentials ({ENV_USER}/{ENV_PASSWORD} or docker login)"


class CredentialError(RuntimeError):
    """Credentials were configured but could not be read: the run stops and says where to look."""


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)
    source: str  # e.g. "RIF_REGISTRY_USER/RIF_REGISTRY_PASSWORD" or "docker credential helper 'pass'"

    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}

    def describe(self) -> str:
        return f"user {self.username!r} from {self.source}"


def describe(found: Credentials | None) -> str:
    """Whose credentials a registry refused, for messages: never the secret."""
    return found.describe() if found else NONE_FOUND


def registry_host(registry: str) -> str:
    """'ghcr.io/org' -> 'ghcr.io'; '127.0.0.1:5000/rocm' -> '127.0.0.1:5000'."""
    return registry.split("/", 1)[0]


def lookup(registry: str) -> Credentials | None:
    """Environment first (CI secrets), then the Docker config's helpers and stored auths."""
    found = from_environment()
    if found is not None:
        return found
    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    if bool(user) != bool(password):
        missing = ENV_PASSWORD if user else ENV_USER
        raise CredentialError(f"{ENV_USER} and {ENV_PASSWORD} go together: {missing} is not set")
    return from_docker_config(registry_host(registry), docker_config_dir())


def from_environment() -> Credentials | None:
    """RIF_REGISTRY_USER and RIF_REGISTRY_PASSWORD, both set (CI secrets); None otherwise."""
    user, password = os.environ.get(ENV_USER), os.environ.get(ENV_PASSWORD)
    return Credentials(user, password, f"{ENV_USER}/{ENV_PASSWORD}") if user and password else None


def docker_config_dir() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")


def from_docker_config(host: str, config_dir: Path) -> Credentials | None:
    config_file = config_dir / "config.json"
    if not config_file.is_file():
        return None
    config = docker_auth.load_config(str(config_file))
    helper = config.get_credential_store(host)
    if helper:
        found = _from_helper(helper, host)
        if found:
            return found
    entry = config.auths.get(host) or {}
    if entry.get("username") and entry.get("password"):
        return Credentials(str(entry["username"]), str(entry["password"]), f"{config_file} auths")
    return None


def _from_helper(helper: str, host: str) -> Credentials | None:
    program = f"docker-credential-{helper}"
    try:
        proc = subprocess.run([program, "get"], input=host, capture_output=True, text=True,
                              timeout=HELPER_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise CredentialError(f"credential helper {program} did not answer for {host} within "
                              f"{HELPER_TIMEOUT_S:g} s") from exc
    except OSError as exc:
        raise CredentialError(f"credential helper {program} (named in the Docker config) cannot run: "
                              f"{exc.strerror}") from exc
    if proc.returncode != 0:
        if "credentials not found" in proc.stdout.lower() + proc.stderr.lower():
            return None  # the helper's documented answer for a host it holds nothing for
        raise CredentialError(f"credential helper {program} failed for {host} (exit {proc.returncode})")
    try:
        data = json.loads(proc.stdout)
        return Credentials(str(data["Username"]), str(data["Secret"]), f"docker credential helper {helper!r}")
    except (ValueError, KeyError, TypeError) as exc:
        raise CredentialError(f"credential helper {program} answered for {host} with something that is not "
                              "its JSON ({\"Username\", \"Secret\"})") from exc
