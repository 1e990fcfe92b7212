"""Hostile image references for `builder test` and `builder push`: a value that is no Docker reference (a path, a
traversal, terminal escapes, 1 MB) is a usage error naming IMAGE, printed cut and escaped, before any engine call;
`../../containers/abc` never reaches the engine as `/images/../../containers/abc/json`."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from builder.cli import build, publish
from builder.cli.app import app

BAD = ["../../containers/abc", "../../../v1.47/containers/create", "x/../../y", "/images/x", "x?all=1", "x#y",
       "x\x1b[2J", "x\nerror: forged", "%2e%2e/x", "UPPER/case", "x:" + "t" * 200, "../" * 300_000]


class Refused(Exception):
    """An engine call: none may happen."""


@pytest.fixture
def no_engine_call(monkeypatch: pytest.MonkeyPatch) -> None:
    def connect() -> None:
        raise Refused("the engine was asked")
    monkeypatch.setattr(build, "connect", connect)
    monkeypatch.setattr(publish, "connect", connect)


@pytest.mark.parametrize("value", BAD, ids=range(len(BAD)))
def test_builder_test_refuses_a_value_that_is_no_reference_before_any_engine_call(value: str,
                                                                                  no_engine_call: None) -> None:
    result = CliRunner().invoke(app, ["test", value])
    assert result.exit_code == 2, result.output
    assert not isinstance(result.exception, Refused)
    assert "IMAGE" in result.output and "is not an image reference" in result.output
    assert "\x1b" not in result.output and len(result.output) < 2000
    assert "error: forged" not in result.output.splitlines()
