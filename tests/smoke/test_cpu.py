"""torch-smoke's CPU checks where the host has no torch: what they do when NumPy or torchvision is absent."""

from __future__ import annotations

import importlib.util

import pytest

from builder.smoke.torch_smoke import cpu
from tests.fakes.smoke import CPU_CELL, fake_torch, outcome, smoke


def test_no_torchvision_skips_nms(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    result = outcome(cpu.torchvision_nms, smoke(CPU_CELL, fake_torch()), "cpu")
    assert (result.status, result.detail) == ("skip", "no torchvision in this image")


def test_no_numpy_fails_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    result = outcome(cpu.numpy_round_trip, smoke(CPU_CELL, fake_torch()), "cpu")
    assert result.status == "fail" and result.detail == "NumPy is not installed" and "install numpy" in result.fix


def test_a_wrong_answer_fails_with_the_sections_fix() -> None:
    torch = fake_torch()
    torch.tensor = lambda rows: WrongMatrix()
    result = outcome(cpu.cpu_matmul, smoke(CPU_CELL, torch), "cpu")
    assert result.status == "fail" and result.detail == "2x2 matmul gave [[0.0]]"
    assert result.fix.startswith("torch computes wrong answers on the CPU")


class WrongMatrix:
    def __matmul__(self, other: object) -> WrongMatrix:
        return self

    def tolist(self) -> list[list[float]]:
        return [[0.0]]
