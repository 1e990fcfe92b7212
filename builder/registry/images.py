"""Image references and whether a registry serves one: what the preflight asks before a bake pulls a base."""

from __future__ import annotations

from collections.abc import Callable

from builder.registry import credentials, retry
from builder.registry.client import RegistryClient
from builder.registry.errors import RegistryError

DOCKER_HUB = "registry-1.docker.io"  # where a bare `debian:13` comes from
LOOKUP_S = 10.0  # the manifest lookups of one run, all together, at most this long per registry

Remote = Callable[[str], str | None]  # ref -> None when its registry serves it, else why not


def registry_of(ref: str) -> tuple[str, str, str]:
    """(registry host, repository, tag or digest) of an image reference, Docker Hub's `library/` made explicit."""
    name, digest = ref.split("@", 1) if "@" in ref else (ref, "")
    last = name.rsplit("/", 1)[-1]
    tag = ""
    if ":" in last:
        name, tag = name.rsplit(":", 1)
    first = name.split("/", 1)[0]
    if "/" in name and ("." in first or ":" in first or first == "localhost"):
        host, repository = first, name.split("/", 1)[1]
    else:
        host, repository = DOCKER_HUB, name if "/" in name else f"library/{name}"
    return host, repository, digest or tag or "latest"


def serves(insecure: frozenset[str] = frozenset()) -> Remote:
    """Whether the registry an image reference names serves it: one manifest read (no layer moves), one try,
    LOOKUP_S per registry in all; a registry that did not answer at all is not asked again."""
    clients: dict[str, RegistryClient] = {}
    down: dict[str, str] = {}

    def lookup(ref: str) -> str | None:
        host, repository, reference = registry_of(ref)
        if host in down:
            return down[host]
        if host not in clients:
            clients[host] = RegistryClient(host, credentials.lookup(host) if host != DOCKER_HUB else None,
                                           policy=retry.Policy(attempts=1, total_s=LOOKUP_S),
                                           insecure=insecure).until(LOOKUP_S)
        try:
            found = clients[host].manifest(repository, reference)
        except RegistryError as exc:
            if exc.status is None:  # no answer at all (refused, unresolved, timed out)
                down[host] = f"{host}: {exc}"
            return f"{host}: {exc}"
        except (credentials.CredentialError, ValueError) as exc:  # a credential helper failing, a bad reference
            return f"{host}: {exc}"
        return None if found is not None else f"{host} has no {repository}:{reference}"
    return lookup
