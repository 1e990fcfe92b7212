"""An archive URL whose port or address the URL parser refuses (a port over 65535, a port that is no number, an
unclosed IPv6 bracket) is a ValueError saying it is not a URL and why, and through `builder lock --apt-snapshot` a
usage error (exit 2) naming the option, never a crash."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.core import aptwords
from testkit.matrices import write_matrix
from tests.render.test_oslock import MATRIX

REFUSED = [("http://127.0.0.1:65536/debian", "Port out of range 0-65535"),
           ("http://127.0.0.1:99999/debian", "Port out of range 0-65535"),
           ("http://127.0.0.1:abc/debian", "Port could not be cast to integer value as 'abc'"),
           ("http://[::1/debian", "Invalid IPv6 URL")]


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_a_url_the_parser_refuses_is_not_a_url_and_says_why(url: str, why: str) -> None:
    with pytest.raises(ValueError, match="is not a URL: ") as caught:
        aptwords.archive_url(url)
    assert why in str(caught.value)


def test_the_highest_port_is_a_url() -> None:
    assert aptwords.archive_url("http://127.0.0.1:65535/debian/") == "http://127.0.0.1:65535/debian"


@pytest.mark.parametrize(("url", "why"), REFUSED)
def test_lock_exits_2_naming_the_option_on_a_url_the_parser_refuses(tmp_path: Path, url: str, why: str) -> None:
    run = CliRunner().invoke(app, ["lock", "--matrix", str(write_matrix(tmp_path, MATRIX)), "--out",
                                   str(tmp_path / "tree"), "--apt-snapshot", url], env={"COLUMNS": "300"})
    output = " ".join(run.output.split())
    assert run.exit_code == 2, output
    assert "--apt-snapshot" in output and "is not a URL" in output and why in output
    assert not (tmp_path / "tree").exists()


def test_a_snapshot_time_is_read_as_that_utc_time() -> None:
    assert aptwords.utc_time("20261101T000000Z") == datetime(2026, 11, 1, tzinfo=UTC)
    assert aptwords.utc_time("20240229T235959Z") == datetime(2024, 2, 29, 23, 59, 59, tzinfo=UTC)


def test_a_snapshot_time_after_now_is_refused_unless_a_lock_says_it() -> None:
    future = "29991231T000000Z"
    with pytest.raises(ValueError, match="'29991231T000000Z' is in the future: a snapshot is an archive's state"):
        aptwords.utc_time(future)
    assert aptwords.utc_time(future, not_after_now=False) == datetime(2999, 12, 31, tzinfo=UTC)


@pytest.mark.parametrize("value", ["maybe", "YES", "Yes", "1", "true", "yes "])
def test_a_trust_setting_other_than_yes_no_or_unset_is_refused_naming_the_setting(value: str) -> None:
    with pytest.raises(ValueError) as caught:
        aptwords.trust_setting(value)
    assert str(caught.value) == (f"RIF_APT_SNAPSHOT_TRUSTED={aptwords.shown(value)}: yes (trust loopback archives "
                                 "unsigned) or no")
