"""The engine tier's workers (tests/fakes/workers.py): each gets its own engine and registry from RIF_TEST_ENGINES, an
engine test is refused to a worker without one, and the slowest modules are handed out first."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.fakes import workers
from tests.fakes.checkout import ROOT

PAIRS = "unix:///run/rif-engine/docker.sock=127.0.0.1:5000 unix:///run/rif-engine-2/docker.sock=127.0.0.1:5001"


def test_each_worker_takes_its_own_pair_and_a_malformed_word_is_named() -> None:
    assert workers.engines(PAIRS)[1] == ("unix:///run/rif-engine-2/docker.sock", "127.0.0.1:5001")
    assert workers.engines(None) == [] and workers.engines("  ") == []
    with pytest.raises(pytest.UsageError, match=re.escape("'127.0.0.1:5000' is not DOCKER_HOST=REGISTRY")):
        workers.engines("127.0.0.1:5000")


class Options:
    loadscopereorder = True  # pytest-xdist's default: the modules with the most tests first


class Config:
    def __init__(self, workerinput: dict[str, object] | None = None) -> None:
        self.option = Options()
        if workerinput is not None:
            self.workerinput = workerinput


def test_a_worker_has_an_engine_of_its_own_only_when_there_are_as_many_pairs_as_workers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")  # inherited by a pytest a test starts: not a worker
    assert workers.worker(Config()) is None and workers.own_engine(Config())  # type: ignore[arg-type]
    second = Config({"workerid": "gw1", "workercount": 2})
    assert workers.worker(second) == (1, 2)  # type: ignore[arg-type]
    monkeypatch.setenv(workers.ENGINES_ENV, PAIRS)
    assert workers.own_engine(second)  # type: ignore[arg-type]
    assert not workers.own_engine(Config({"workerid": "gw2", "workercount": 3}))  # type: ignore[arg-type]
    monkeypatch.delenv(workers.ENGINES_ENV)
    assert not workers.own_engine(second)  # type: ignore[arg-type]
    monkeypatch.setenv(workers.ENGINES_ENV, PAIRS)
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere.sock")  # both restored after the test
    monkeypatch.setenv("RIF_TEST_REGISTRY", "127.0.0.1:1")
    workers.pytest_configure(second)  # type: ignore[arg-type]
    assert (os.environ["DOCKER_HOST"], os.environ["RIF_TEST_REGISTRY"]) == workers.engines(PAIRS)[1]
    assert not second.option.loadscopereorder  # the slowest modules first, not the longest


class Item:
    def __init__(self, path: Path, name: str) -> None:
        self.path, self.name = path, name


def test_the_slowest_modules_come_first_and_each_module_keeps_its_order(tmp_path: Path) -> None:
    def item(rel: str, name: str) -> Item:
        return Item(tmp_path / rel, name)
    items = [item("tests/a/test_x.py", "1"), item("tests/publish/test_promote.py", "p1"),
             item("tests/a/test_x.py", "2"), item("tests/validate/test_apptainer.py", "a1"),
             item("tests/publish/test_promote.py", "p2"), item("tests/b/test_y.py", "3")]
    ordered = workers.slowest_first(items, str(tmp_path))  # type: ignore[arg-type]
    assert [i.name for i in ordered] == ["a1", "p1", "p2", "1", "2", "3"]
    missing = [path for path in workers.SLOWEST_FIRST if not (ROOT / path).is_file()]
    assert not missing, f"tests/fakes/workers.py names modules that are gone: {missing}"
