"""The bake driver without an engine: builder detection, and a failed target isolated from the others
(a scripted `docker` on PATH plays BuildKit's plain log)."""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from pathlib import Path

import pytest

from builder.buildkit import bake
from builder.buildkit.builders import BuildKit
from builder.buildkit.export import Export


def test_every_target_exports_to_one_layout_on_the_network_asked_for(tmp_path: Path) -> None:
    export = Export(tmp_path / "layout", "zstd")
    extra = bake.override({"a": "rif-local/x:a-1", "b": "rif-local/x:b-2"}, export)
    assert all("network" not in v for v in extra["target"].values())  # BuildKit's own network: the default
    hosted = bake.override({"a": "rif-local/x:a-1", "b": "rif-local/x:b-2"}, export, "host")
    assert {t: v["network"] for t, v in hosted["target"].items()} == {"a": "host", "b": "host"}
    [output] = extra["target"]["b"]["output"]
    assert output.startswith(f"type=oci,tar=false,dest={tmp_path / 'layout'},name=rif-local/x:b-2,")
    assert "compression=zstd" in output.split(",")
    # The template sets each step's file times; BuildKit's rewrite would recompress every layer on every export.
    assert "rewrite-timestamp" not in output
    assert "force-compression" not in output  # compressed layers (the base's, cached steps') are reused as they are
    assert bake.override({"a": "n"}, None, "host") == {"target": {"a": {"network": "host"}}}  # plain: the engine


FAKE = r'''#!{python}
"""A scripted `docker buildx bake`: a target named bad* fails in its own step; the others succeed."""
import json, os, sys
args = sys.argv[1:]
if args[:2] == ["buildx", "version"]:
    print("github.com/docker/buildx v0.13.1"); sys.exit(0)
meta = args[args.index("--metadata-file") + 1]
targets = [a for a in args[args.index("--metadata-file") + 2:] if not a.startswith("-")]
with open({log!r}, "a") as fh:
    fh.write(" ".join(targets) + "\n")
with open({log!r} + ".json", "a") as fh:  # the whole call, and the override file bake was given
    files = [args[i + 1] for i, a in enumerate(args) if a == "--file"]
    fh.write(json.dumps({{"args": args, "override": json.load(open(files[-1]))}}) + "\n")
for n, t in enumerate(targets):
    print(f"#{{n + 10}} [{{t}} runtime 1/2] RUN pip install")
for n, t in enumerate(targets):
    if t.startswith("good") and any(x.startswith("bad") for x in targets):
        # collateral: BuildKit ends the other targets' steps when one fails
        print(f"#{{n + 10}} ERROR: {{os.environ.get('COLLATERAL', 'failed to copy: context canceled')}}")
for n, t in enumerate(targets):
    if t.startswith("bad"):
        print(f"#{{n + 10}} ERROR: process did not complete successfully: exit code: 1")
        print("ERROR: failed to solve: process did not complete successfully: exit code: 1")
        sys.exit(1)
json.dump({{t: {{"containerimage.digest": "sha256:" + t}} for t in targets}}, open(meta, "w"))
'''


@pytest.fixture
def scripted_docker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    log = tmp_path / "calls.log"
    script = tmp_path / "bin" / "docker"
    script.parent.mkdir()
    script.write_text(FAKE.format(python=sys.executable, log=str(log)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")
    return log


def test_a_failed_target_blocks_no_other(scripted_docker: Path, tmp_path: Path) -> None:
    lines: list[tuple[str | None, str]] = []
    results = bake.bake(tmp_path / "docker-bake.json", ["good-a", "bad-b", "good-c"],
                        lambda target, line: lines.append((target, line)))
    assert {t: (r.ok, r.image_id) for t, r in results.items()} == {
        "good-a": (True, "sha256:good-a"), "bad-b": (False, None), "good-c": (True, "sha256:good-c")}
    assert "exit code: 1" in (results["bad-b"].error or "")
    assert any("ERROR" in line for line in results["bad-b"].log_tail)
    # One bake of all three, then the rest again without the target the log blamed.
    assert scripted_docker.read_text().splitlines() == ["good-a bad-b good-c", "good-a good-c"]
    assert ("bad-b", "#11 [bad-b runtime 1/2] RUN pip install") in lines


def test_the_bake_runs_on_the_builder_and_network_asked_for(scripted_docker: Path, tmp_path: Path) -> None:
    bake.bake(tmp_path / "docker-bake.json", ["good-a"])
    bake.bake(tmp_path / "docker-bake.json", ["good-a"], export=Export(tmp_path / "oci"),
              kit=BuildKit("rif-second", "host", context="rif-second"))
    plain, remote = (json.loads(line) for line in Path(f"{scripted_docker}.json").read_text().splitlines())
    assert plain["args"][:2] == ["buildx", "bake"] and "--builder" not in plain["args"]
    assert "network.host" not in plain["args"] and plain["override"] == {"target": {"good-a": {}}}
    assert remote["args"][:6] == ["--context", "rif-second", "buildx", "bake", "--builder", "rif-second"]
    allowed = [remote["args"][i + 1] for i, a in enumerate(remote["args"]) if a == "--allow"]
    assert allowed == ["network.host", f"fs.write={tmp_path / 'oci'}"]
    assert remote["override"]["target"]["good-a"]["network"] == "host"


def test_collateral_errors_of_another_wording_blame_no_healthy_target(scripted_docker: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    # Seen in CI: a target ended by the failure of another logged this, not "canceled", and was blamed.
    monkeypatch.setenv("COLLATERAL", "rpc error: code = Unavailable desc = transport is closing")
    results = bake.bake(tmp_path / "docker-bake.json", ["good-a", "bad-b", "good-c"])
    assert {t: r.ok for t, r in results.items()} == {"good-a": True, "bad-b": False, "good-c": True}
    assert "exit code: 1" in (results["bad-b"].error or "")
    # Three suspects: each baked alone, so only the evidence of its own bake counts.
    assert scripted_docker.read_text().splitlines() == ["good-a bad-b good-c", "good-a", "bad-b", "good-c"]


def test_without_buildx_the_message_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "docker"
    script.write_text("#!/bin/sh\necho \"docker: 'buildx' is not a docker command.\" >&2\nexit 1\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(bake.BuildxUnavailable, match=re.escape("scripts/setup.sh")):
        bake.require_buildx()
    assert json.dumps(bake.BUILDX_HINT).count("\\n") == 0  # one line
