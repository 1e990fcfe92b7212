"""Which BuildKit bakes, on which network its RUN steps run, and whether that builder can do it.

Any buildx builder bakes (`--builder NAME`, `docker buildx ls`): the engine of a docker context (driver
`docker`), a BuildKit in a container (`docker-container`), a standalone buildkitd (`remote`) or pods
(`kubernetes`). The images come back through the OCI layout the buildx client writes (fs.write is the client's
own grant, nothing a builder gives), and are loaded into the engine DOCKER_HOST names, where validation runs: a
remote builder builds, the local engine runs. The current docker-driver builder is that engine's own BuildKit:
its images go straight into the engine's store (builder.buildkit.export).

Before any bake, `require_builder` asks `docker buildx inspect` for the builder and names what it lacks, in one line:
unknown or unreachable, not running, no linux/amd64, the network.host entitlement when host networking was asked
for (a buildkitd grants it only with `--allow-insecure-entitlement network.host`), or, on a docker engine without
a bridge, BuildKit's default network (RUN steps would fail with "network bridge not found").
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from builder.buildkit.engine import EngineUnavailable
from builder.buildkit.preflight import LOCAL, Store

NETWORKS = ("default", "host")  # BuildKit's own network for RUN steps, or the build host's
INSPECT_TIMEOUT_S = 60
BOOTS_ITSELF = ("docker-container", "kubernetes")  # an inactive node of these is started by the bake itself
AMD64 = "linux/amd64"
# What picks buildx's current builder and the engine a docker-driver builder runs on (BuildKit.identity)
IDENTITY_ENV = ("BUILDX_BUILDER", "DOCKER_CONTEXT", "DOCKER_HOST", "DOCKER_CONFIG")
HOST_FLAG = ("builders of this driver grant it only when created with --buildkitd-flags "
             "'--allow-insecure-entitlement network.host'")


class BuilderUnusable(EngineUnavailable):
    """The builder asked for cannot bake these images: one line naming it, its driver and what it lacks."""


@dataclass(frozen=True)
class BuildKit:
    """Where and how a bake runs: the builder (None: buildx's current one) and its RUN steps' network."""

    name: str | None = None
    network: str = "default"  # "host": RUN steps on the build host's network (needs the network.host entitlement)
    context: str | None = None  # a docker-driver builder of another docker context: buildx runs in that context
    driver: str | None = None  # known once `require_builder` inspected the builder

    def buildx(self, command: str) -> list[str]:
        """`docker buildx COMMAND` for this builder. buildx refuses `--builder` for the docker driver of another
        context ("use `docker --context=NAME buildx`"), so such a builder is reached by its context."""
        where = ["--context", self.context] if self.context else []
        return ["docker", *where, "buildx", command, *(["--builder", self.name] if self.name else [])]

    def identity(self) -> str:
        """Which BuildKit bakes, as far as this process can tell before asking it: the builder, the context, and the
        environment buildx chooses the current builder and engine by. Two runs at once on different builders share
        no build tree (imagetree.run_tree), so neither waits for the other's bake."""
        chosen = {key: os.environ.get(key, "") for key in IDENTITY_ENV}
        return json.dumps({"name": self.name, "context": self.context, **chosen}, sort_keys=True)

    def allow(self) -> list[str]:
        """The entitlements the bake asks for: network.host only when RUN steps use the host's network."""
        return ["--allow", "network.host"] if self.network == "host" else []


CURRENT = BuildKit()  # buildx's current builder, BuildKit's default network: what a plain `docker buildx bake` uses


@dataclass
class Node:
    name: str = ""
    endpoint: str = ""
    status: str = ""
    error: str = ""
    platforms: list[str] = field(default_factory=list)
    flags: str = ""  # BuildKit daemon flags, as buildx created the node

    @property
    def usable(self) -> bool:
        return not self.error and self.status == "running"


@dataclass
class Inspected:
    """What `docker buildx inspect [NAME]` printed about a builder."""

    name: str = ""
    driver: str = ""
    error: str = ""
    nodes: list[Node] = field(default_factory=list)


def parse_inspect(text: str) -> Inspected:
    """buildx's `inspect` text: `Key: value` lines, the builder's first, then one block per node from `Nodes:`
    on (each starts with its `Name:`); indented lines (labels, GC policy rules) are skipped."""
    found = Inspected()
    node: Node | None = None
    in_nodes = False
    for line in text.splitlines():
        if not line.strip() or line[:1].isspace():
            continue
        if line.strip() == "Nodes:":
            in_nodes = True
            continue
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if not in_nodes:
            if key in ("Name", "Driver", "Error"):
                setattr(found, key.lower(), value)
            continue
        if key == "Name":
            node = Node(name=value)
            found.nodes.append(node)
        elif node is None:
            continue
        elif key in ("Endpoint", "Status", "Error"):
            setattr(node, key.lower(), value)
        elif key == "Platforms":
            node.platforms = [p.strip() for p in value.split(",") if p.strip()]
        elif key == "BuildKit daemon flags":
            node.flags = value
    return found


def lacks(found: Inspected, network: str, has_bridge: Callable[[], bool]) -> list[str]:
    """What the builder lacks to bake linux/amd64 images on network; [] when it has all of it.

    has_bridge: whether a docker-driver builder's engine has a bridge network (asked only when it matters)."""
    if found.error:
        return [f"a reachable endpoint ({found.error})"]
    if not found.nodes:
        return ["a node"]
    nodes = [n for n in found.nodes if n.usable or (found.driver in BOOTS_ITSELF and n.status == "inactive"
                                                     and not n.error)]
    if not nodes:
        states = "; ".join(f"{n.name or '?'} at {n.endpoint or '?'}: {n.error or n.status or 'no status'}"
                           for n in found.nodes)
        return [f"a running node ({states})"]
    missing = []
    listed = [n for n in nodes if n.platforms]
    if listed and not any(AMD64 in n.platforms for n in listed):
        missing.append(f"the {AMD64} platform (it builds {', '.join(listed[0].platforms)})")
    if network == "host" and found.driver in BOOTS_ITSELF and not any("network.host" in n.flags for n in nodes):
        missing.append(f"the network.host entitlement that --build-network host needs ({HOST_FLAG})")
    if network == "default" and found.driver == "docker" and not has_bridge():
        missing.append("a bridge network for BuildKit's default network: its engine has none, so RUN steps would "
                       "fail with 'network bridge not found'; build with --build-network host "
                       "(RIF_BUILD_NETWORK=host)")
    return missing


def inspect(kit: BuildKit) -> tuple[Inspected, str]:
    """The builder as `docker buildx inspect` describes it, and the error buildx printed instead ('' if none)."""
    cmd = ["docker", "buildx", "inspect", *([kit.name] if kit.name else [])]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSPECT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return Inspected(), f"`{' '.join(cmd)}` did not answer within {INSPECT_TIMEOUT_S} s"
    except OSError as exc:
        return Inspected(), f"cannot run docker buildx: {exc}"
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return Inspected(), last.removeprefix("ERROR: ") + " (`docker buildx ls` lists the builders)"
    return parse_inspect(proc.stdout), ""


def require_builder(kit: BuildKit) -> BuildKit:
    """kit with its builder's driver (and, for the docker driver of a named builder, its context); else
    BuilderUnusable naming the builder, its driver, its state and what it lacks: one line, before any bake."""
    found, error = inspect(kit)
    name = found.name or kit.name or "(current)"
    if error:
        raise BuilderUnusable(f"builder {name}: {error}")
    resolved = replace(kit, driver=found.driver, context=kit.name if found.driver == "docker" and kit.name else None)
    missing = lacks(found, kit.network, lambda: _has_bridge(resolved))
    if missing:
        state = ", ".join(dict.fromkeys(n.status for n in found.nodes if n.status)) or "unknown state"
        raise BuilderUnusable(f"builder {name} ({found.driver or 'unknown'} driver, {state}) lacks "
                              + "; and ".join(missing))
    return resolved


def _has_bridge(kit: BuildKit) -> bool:
    """Whether the engine of a docker-driver builder has the `bridge` network BuildKit's default network uses."""
    where = ["--context", kit.context] if kit.context else []
    try:
        proc = subprocess.run(["docker", *where, "network", "inspect", "bridge"], capture_output=True,
                              timeout=INSPECT_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return True  # cannot tell: the bake itself will say
    return proc.returncode == 0


def has_image(kit: BuildKit) -> Callable[[str], bool] | None:
    """How to ask whether the builder's own image store holds a base: for the docker driver of a named context,
    that engine; None for the current docker builder (the local engine: the caller asks it); never, for a builder
    with no engine's image store (docker-container, remote, kubernetes: BuildKit pulls every FROM)."""
    if kit.driver not in (None, "docker"):
        return lambda ref: False
    if kit.context is None:
        return None
    context = kit.context

    def has(ref: str) -> bool:
        try:
            proc = subprocess.run(["docker", "--context", context, "image", "inspect", ref], capture_output=True,
                                  timeout=INSPECT_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return proc.returncode == 0
    return has


def store(kit: BuildKit) -> Store:
    """The image store the builder takes bases from, as a preflight message names it (has_image asks it)."""
    if kit.driver not in (None, "docker"):
        return Store(f"builder {kit.name}, whose {kit.driver} driver has no engine's images (it pulls every base)",
                     "push {ref} to a registry the builder reaches and pin it there (`builder lock --base-registry "
                     "HOST/NS`)")
    if kit.context is None:
        return LOCAL
    return Store(f"the engine of docker context {kit.context} (builder {kit.name})",
                 f"`docker save {{ref}} | docker --context {kit.context} load`")
