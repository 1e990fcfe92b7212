"""The Apptainer runner's recipe and its cache: a tag from the recipe's hash, made only when the engine lacks it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from docker.errors import ImageNotFound

from builder.core.errors import InputError
from builder.validate import sifrunner


class Engine:
    """Just images.get: the runner is there or not."""

    def __init__(self, has: set[str]) -> None:
        self.images = SimpleNamespace(get=self.get)
        self.has = has

    def get(self, ref: str) -> Any:
        if ref not in self.has:
            raise ImageNotFound(ref)
        return SimpleNamespace(id="sha256:" + "0" * 64)


def test_the_runner_tag_is_the_hash_of_its_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    ref = sifrunner.runner_ref()
    assert ref.startswith("rif-apptainer-runner:") and len(ref.rpartition(":")[2]) == 16
    assert sifrunner.runner_ref() == ref  # stable: made once, then reused
    monkeypatch.setattr(sifrunner, "PACKAGES", (*sifrunner.PACKAGES, "gocryptfs"))
    assert sifrunner.runner_ref() != ref  # a new recipe is a new runner
    assert "apptainer" in sifrunner.recipe()["packages"]  # type: ignore[operator]


def test_it_is_made_only_when_the_engine_lacks_it(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str] = []
    monkeypatch.setattr(sifrunner, "make", lambda ref, mirror=None: made.append(ref))
    ref = sifrunner.runner_ref()
    assert sifrunner.ensure(Engine({ref})) == ref and made == []  # type: ignore[arg-type]
    assert sifrunner.ensure(Engine(set())) == ref and made == [ref]  # type: ignore[arg-type]


def test_without_a_debian_mirror_in_the_apt_sources_it_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("builder.buildkit.baseimage.host_mirror", lambda distro: None)
    with pytest.raises(InputError) as info:
        sifrunner.make(sifrunner.runner_ref())
    [problem] = info.value.problems
    assert problem.file == Path("/etc/apt") and "no debian mirror" in problem.message
