"""The benchmarks' fresh engine proves it is up, private and empty before a benchmark uses it
(benchmarks/support/freshengine.py): the checks on fakes, and one real engine (docker-marked: starts in about a
second)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from benchmarks.support import freshengine
from benchmarks.support.freshengine import EngineError, check_empty, check_private, containerd_config, wait_up

PRIVATE = Path("/tmp/bench/engine/containerd.sock")
EMPTY_DF = [{"Type": t, "TotalCount": "0"} for t in ("Images", "Containers", "Local Volumes", "Build Cache")]


def test_own_containerd_is_accepted() -> None:
    check_private({"Containerd": {"Address": str(PRIVATE)}, "Driver": "overlayfs"}, PRIVATE)


@pytest.mark.parametrize("info", [
    {"Containerd": {"Address": "/run/containerd/containerd.sock"}, "Driver": "overlayfs"},  # the system's
    {"Driver": "overlayfs"},  # an engine that does not say which
    {"Containerd": {"Address": str(PRIVATE)}, "Driver": "overlay2"},  # the graph driver store, not production's
])
def test_shared_or_unknown_containerd_is_refused(info: dict[str, object]) -> None:
    with pytest.raises(EngineError):
        check_private(info, PRIVATE)


def test_empty_engine_is_accepted() -> None:
    check_empty(EMPTY_DF, "")


@pytest.mark.parametrize(("kind", "words"), [("Images", "Images: 1"), ("Build Cache", "Build Cache: 1"),
                                             ("Local Volumes", "Local Volumes: 1"), ("Containers", "Containers: 1")])
def test_anything_held_is_refused(kind: str, words: str) -> None:
    rows = [{**row, "TotalCount": "1"} if row["Type"] == kind else row for row in EMPTY_DF]
    with pytest.raises(EngineError, match=words):
        check_empty(rows, "")


def test_an_image_listed_is_refused_and_silence_is_no_proof() -> None:
    with pytest.raises(EngineError, match="sha256:abc"):
        check_empty(EMPTY_DF, "sha256:abc\n")
    with pytest.raises(EngineError, match="reported nothing"):
        check_empty([], "")


def test_containerd_config_keeps_everything_under_the_engine_folder(tmp_path: Path) -> None:
    config = tomllib.loads(containerd_config(tmp_path))
    paths = [config["root"], config["state"], config["grpc"]["address"], config["ttrpc"]["address"],
             config["debug"]["address"]]
    assert all(Path(p).is_relative_to(tmp_path) for p in paths), paths
    assert config["grpc"]["address"] == str(tmp_path / "containerd.sock")


def _exited(tmp_path: Path) -> freshengine.Started:
    log = tmp_path / "dockerd.log"
    log.write_text("starting\nfailed to start daemon: no such device\n")
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait()
    return ("dockerd", proc, log)


def test_a_process_that_exits_is_an_error_with_its_log(tmp_path: Path) -> None:
    with pytest.raises(EngineError, match=r"dockerd exited \(3\)[\s\S]*no such device"):
        wait_up([_exited(tmp_path)], lambda: None)


def test_an_engine_that_never_answers_is_an_error_not_a_yield(tmp_path: Path) -> None:
    log = tmp_path / "dockerd.log"
    log.write_text("API listen on nowhere\n")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        with pytest.raises(EngineError, match=r"did not answer[\s\S]*API listen on nowhere"):
            wait_up([("dockerd", proc, log)], lambda: None, seconds=0)
    finally:
        proc.kill()
        proc.wait()


def test_the_answer_is_returned(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert wait_up([("dockerd", proc, tmp_path / "log")], lambda: {"ID": "x"}) == {"ID": "x"}
    finally:
        proc.kill()
        proc.wait()


def _engine_binaries() -> bool:
    engine = freshengine.ENGINE
    path = f"{engine / 'usr/bin'}:{engine / 'usr/sbin'}:{os.environ['PATH']}"
    return all(shutil.which(b, path=path) for b in ("dockerd", "containerd", "docker")) and os.geteuid() == 0


@pytest.mark.docker
@pytest.mark.skipif(not _engine_binaries(), reason="needs root and dockerd, containerd, docker (scripts/setup.sh)")
def test_a_real_fresh_engine_is_private_and_empty_and_refuses_once_it_holds_something() -> None:
    root = Path(subprocess.run(["mktemp", "-d", "/tmp/rif-fe-XXXXXX"], capture_output=True, text=True,
                               check=True).stdout.strip())  # short: a unix socket path has 108 bytes
    try:
        with freshengine.empty_engine(root / "e") as engine:
            env = {**os.environ, "PATH": f"{freshengine.ENGINE / 'usr/bin'}:{os.environ['PATH']}"}
            info = freshengine.engine_info(engine.host, env)
            assert info is not None and info["Containerd"]["Address"] == str(root / "e" / "containerd.sock")
            freshengine.docker_out(engine.host, "volume", "create", "rif-fe-probe", env=env)
            with pytest.raises(EngineError, match="Local Volumes: 1"):
                freshengine.prove(engine, info, env)
        pid = int((root / "e" / "dockerd.pid").read_text()) if (root / "e" / "dockerd.pid").exists() else None
        assert pid is None or not Path(f"/proc/{pid}").exists()  # stopped with the context
        assert f"{root}/" not in Path("/proc/self/mounts").read_text()  # nothing left mounted: the folder can go
    finally:
        shutil.rmtree(root, ignore_errors=True)
