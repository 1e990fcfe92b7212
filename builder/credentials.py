"""Registry credentials, from the environment or the Docker credential store; never from the repository.

The password never leaves this module's objects in printable form: errors name the user and where the
credentials came from, never the secret.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Credentials:
    username: str
    password: str = field(repr=False)
    source: str  # e.g. "RIF_REGISTRY_USER/RIF_REGISTRY_PASSWORD" or "docker config (credsStore pass)"

    def auth_config(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}

    def describe(self) -> str:
        return f"user {self.username!r} from {self.source}"


def registry_host(registry: str) -> str:
    """'ghcr.io/org' -> 'ghcr.io'; '127.0.0.1:5000/rocm' -> '127.0.0.1:5000'."""
    return registry.split("/", 1)[0]


def lookup(registry: str) -> Credentials | None:
    """Environment first (CI secrets), then the Docker config's helpers and stored auths."""
    user, password = os.environ.get("RIF_REGISTRY_USER"), os.environ.get("RIF_REGISTRY_PASSWORD")
    if user and password:
        return Credentials(user, password, "RIF_REGISTRY_USER/RIF_REGISTRY_PASSWORD")
    return from_docker_config(registry_host(registry), docker_config_dir())


def docker_config_dir() -> Path:
    return Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")


def from_docker_config(host: str, config_dir: Path) -> Credentials | None:
    try:
        config = json.loads((config_dir / "config.json").read_text())
    except (OSError, ValueError):
        return None
    helper = (config.get("credHelpers") or {}).get(host) or config.get("credsStore")
    if helper:
        found = _from_helper(helper, host)
        if found:
            return found
    entry = (config.get("auths") or {}).get(host) or {}
    if entry.get("auth"):
        user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
        return Credentials(user, password, f"{config_dir / 'config.json'} auths")
    return None


def _from_helper(helper: str, host: str) -> Credentials | None:
    try:
        proc = subprocess.run([f"docker-credential-{helper}", "get"], input=host, capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    data = json.loads(proc.stdout)
    return Credentials(data["Username"], data["Secret"], f"docker credential helper {helper!r}")
