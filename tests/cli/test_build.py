"""`builder build` and `base`: what is refused before anything is built or pushed."""

from __future__ import annotations

import pytest

from tests.fakes.checkout import DATA, builder_cli


def test_push_without_validation_is_refused() -> None:
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--push", "--registry", "127.0.0.1:1/x",
                       "--no-validate")
    assert proc.returncode == 2
    assert "--no-validate" in proc.stderr and "never pushed" in proc.stderr


def test_push_needs_a_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIF_REGISTRY", raising=False)
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--push")
    assert proc.returncode == 2 and "--registry" in proc.stderr


def test_unknown_cell_filter_is_bad_input() -> None:
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--cell", "nope")
    assert proc.returncode == 2 and "no cell has tag 'nope'" in proc.stderr


@pytest.mark.docker
def test_base_refuses_unknown_and_dnf_os() -> None:
    assert builder_cli("base", "plan9").returncode == 2
    proc = builder_cli("base", "rocky-9")
    assert proc.returncode == 2 and "apt distros only" in proc.stderr


def test_insecure_registry_without_push_does_not_apply() -> None:
    proc = builder_cli("build", "--matrix", str(DATA / "e2e.yaml"), "--insecure-registry", "reg.lan:5000")
    assert proc.returncode == 2 and "applies with --push only" in proc.stderr
