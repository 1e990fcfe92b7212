"""The builder preflight without an engine: `docker buildx inspect` as buildx 0.29.1 printed it on this project's
engine, and a scripted `docker` that replays it.

tests/data/buildx/inspect-*.txt were captured with buildx 0.29.1 (Debian's 0.29.1+ds1-4) against dockerd 28.5
(no bridge): `default` (the engine's own builder), `context` (a second dockerd reached as a docker context),
`unreachable` (a context whose socket answers nothing), `docker-container*` (builders created, never booted: their
image cannot be pulled here; with --buildkitd-flags '--debug', with '--allow-insecure-entitlement security.insecure'
and with a buildkitd.toml), `remote-inactive` (a remote driver at tcp://127.0.0.1:1) and `missing` (stderr of an
unknown name).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from builder.buildkit.builders import (
    CURRENT,
    BuilderUnusable,
    BuildKit,
    has_image,
    lacks,
    parse_inspect,
    require_builder,
)
from tests.fakes.checkout import DATA

CAPTURED = DATA / "buildx"


def captured(name: str) -> str:
    return (CAPTURED / f"inspect-{name}.txt").read_text()


def never(what: str) -> bool:
    raise AssertionError(f"asked for {what}")


def test_the_engines_own_builder_and_a_context_parse_as_running_docker_builders() -> None:
    for name, builder in (("default", "default"), ("context", "rif-second")):
        found = parse_inspect(captured(name))
        assert (found.name, found.driver, found.error) == (builder, "docker", "")
        [node] = found.nodes
        assert (node.name, node.endpoint, node.status) == (builder, builder, "running")
        assert node.platforms == ["linux/amd64", "linux/amd64/v2", "linux/amd64/v3"]  # labels, GC rules skipped
        assert lacks(found, "host", lambda: never("a bridge")) == []  # dockerd grants network.host itself
        assert lacks(found, "default", lambda: True) == []


def test_an_engine_without_a_bridge_lacks_buildkits_default_network() -> None:
    [missing] = lacks(parse_inspect(captured("default")), "default", lambda: False)
    assert "network bridge not found" in missing and "--build-network host" in missing


def test_an_unreachable_context_and_an_unknown_name_say_so() -> None:
    found = parse_inspect(captured("unreachable"))
    assert (found.name, found.driver) == ("rif-gone", "")
    assert lacks(found, "default", lambda: never("a bridge")) == [
        "a reachable endpoint (Cannot connect to the Docker daemon at unix:///tmp/anyb/nothing.sock. Is the "
        "docker daemon running?)"]
    assert parse_inspect(captured("missing")).nodes == []


def test_a_docker_container_builder_boots_itself_and_grants_host_networking_only_when_created_to() -> None:
    for name in ("docker-container", "docker-container-config"):
        found = parse_inspect(captured(name))
        assert found.driver == "docker-container" and found.nodes[0].status == "inactive"
        assert "network.host" in found.nodes[0].flags  # buildx adds it unless the flags name an entitlement
        assert lacks(found, "host", lambda: never("a bridge")) == []
    refused = parse_inspect(captured("docker-container-no-host"))
    assert lacks(refused, "default", lambda: never("a bridge")) == []
    [missing] = lacks(refused, "host", lambda: never("a bridge"))
    assert missing.startswith("the network.host entitlement") and "--allow-insecure-entitlement network.host" in missing


def test_an_inactive_remote_builder_is_unreachable() -> None:
    found = parse_inspect(captured("remote-inactive"))
    assert found.driver == "remote"
    assert lacks(found, "default", lambda: never("a bridge")) == ["a running node (rif-rem0 at tcp://127.0.0.1:1: "
                                                                 "inactive)"]


def test_a_builder_without_linux_amd64_is_refused() -> None:
    text = captured("context").replace("linux/amd64, linux/amd64/v2, linux/amd64/v3", "linux/arm64, linux/arm/v7")
    assert lacks(parse_inspect(text), "host", lambda: True) == [
        "the linux/amd64 platform (it builds linux/arm64, linux/arm/v7)"]


FAKE = r'''#!{python}
"""A scripted `docker`: `buildx inspect [NAME]` prints the capture named by INSPECT (exit 1 for `missing`),
`network inspect bridge` fails (an engine without one); every call is logged."""
import json, os, sys
args = sys.argv[1:]
with open({log!r}, "a") as fh:
    fh.write(json.dumps(args) + "\n")
if args[-3:] == ["network", "inspect", "bridge"]:
    sys.exit(1)
text = open(os.path.join({data!r}, "inspect-" + os.environ["INSPECT"] + ".txt")).read()
if os.environ["INSPECT"] == "missing":
    sys.stderr.write(text); sys.exit(1)
print(text, end="")
'''


@pytest.fixture
def scripted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.log"
    script = tmp_path / "bin" / "docker"
    script.parent.mkdir()
    script.write_text(FAKE.format(python=sys.executable, log=str(log), data=str(CAPTURED)))
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def test_a_named_docker_builder_is_reached_through_its_context(scripted: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT", "context")
    kit = require_builder(BuildKit("rif-second", "host"))
    assert (kit.driver, kit.context) == ("docker", "rif-second")
    assert calls(scripted) == [["buildx", "inspect", "rif-second"]]  # host networking: no bridge asked for
    assert kit.buildx("bake") == ["docker", "--context", "rif-second", "buildx", "bake", "--builder", "rif-second"]
    assert kit.allow() == ["--allow", "network.host"]
    assert CURRENT.buildx("bake") == ["docker", "buildx", "bake"] and CURRENT.allow() == []


def test_the_default_network_on_an_engine_without_a_bridge_stops_before_any_bake(
        scripted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INSPECT", "context")
    with pytest.raises(BuilderUnusable) as caught:
        require_builder(BuildKit("rif-second"))
    message = str(caught.value)
    assert message.startswith("builder rif-second (docker driver, running) lacks a bridge network")
    assert "\n" not in message
    assert calls(scripted)[-1] == ["--context", "rif-second", "network", "inspect", "bridge"]


@pytest.mark.parametrize(("capture", "name", "network", "said"), [
    ("missing", "nosuch", "default", 'builder nosuch: no builder "nosuch" found (`docker buildx ls` lists'),
    ("unreachable", "rif-gone", "default", "builder rif-gone (unknown driver, unknown state) lacks a reachable "
                                           "endpoint (Cannot connect to the Docker daemon"),
    ("remote-inactive", "rif-rem", "host", "builder rif-rem (remote driver, inactive) lacks a running node"),
    ("docker-container-no-host", "rif-dc-sec", "host", "builder rif-dc-sec (docker-container driver, inactive) "
                                                       "lacks the network.host entitlement"),
])
def test_what_a_builder_lacks_is_one_line_naming_it_and_its_driver(
        scripted: Path, monkeypatch: pytest.MonkeyPatch, capture: str, name: str, network: str, said: str) -> None:
    monkeypatch.setenv("INSPECT", capture)
    with pytest.raises(BuilderUnusable) as caught:
        require_builder(BuildKit(name, network))
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)



def test_the_bases_are_looked_up_where_the_builder_finds_them(scripted: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert has_image(BuildKit(driver="docker")) is None  # the current engine's builder: the caller asks that engine
    never_there = has_image(BuildKit("rif-rem", driver="remote"))
    assert never_there is not None and not never_there("debian:12")  # BuildKit pulls every FROM itself
    monkeypatch.setenv("INSPECT", "context")
    there = has_image(BuildKit("rif-second", driver="docker", context="rif-second"))
    assert there is not None and there("debian:12")
    assert calls(scripted) == [["--context", "rif-second", "image", "inspect", "debian:12"]]
