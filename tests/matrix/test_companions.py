"""builder.matrix.companions: the torchvision and torchaudio versions that pair with a torch release."""

from __future__ import annotations

import pytest

from builder.matrix.companions import default_companions


@pytest.mark.parametrize(("torch", "expected"), [
    ("2.9.1", ("0.24.1", "2.9.1")),
    ("2.13.0", ("0.28.0", "2.11.0")),
    ("2.12.1", ("0.27.1", "2.11.0")),
    ("2.11.0", ("0.26.0", "2.11.0")),
    ("2.10", ("0.25.0", "2.10.0")),
    ("2.8.0", ("0.23.0", "2.8.0")),
    ("2.6.0", ("0.21.0", "2.6.0")),
    ("2.5.1", ("0.20.1", "2.5.1")),
    ("1.13.1", (None, None)),
    ("2.14.0", ("0.29.0", "2.11.0")),
    ("2.14.1", ("0.29.1", "2.11.0")),
    ("2.16.0", (None, None)),
    ("3.0", (None, None)),
])
def test_default_companions(torch: str, expected: tuple[str | None, str | None]) -> None:
    assert default_companions(torch) == expected



@pytest.mark.parametrize(("torch", "expected"), [("2.0.0", ("0.15.1", "2.0.1")), ("2.0.1", ("0.15.2", "2.0.2"))])
def test_default_companions_of_torch_2_0(torch: str, expected: tuple[str, str]) -> None:
    assert default_companions(torch) == expected
