"""One index page, remembered and checked again by a conditional GET against a loopback simple index
(testkit/simpleindex.py): 304 or the same body is unchanged, anything else is changed, never unsure-unchanged."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from builder.render import indexpages
from testkit.simpleindex import JSON, SimpleIndex, choose
from testkit.synthwheels import wheel


@pytest.fixture(params=[True, False], ids=["validators", "no-validators"])
def index(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[SimpleIndex]:
    (tmp_path / "wheels").mkdir()
    wheel(tmp_path / "wheels", "numpy", "2.4.6")
    served = SimpleIndex(tmp_path / "wheels", validators=request.param)
    yield served
    served.close()


def test_an_unchanged_page_is_unchanged_by_304_or_by_its_body(index: SimpleIndex) -> None:
    page = indexpages.fetch(index.url + "numpy/")
    assert page.status == 200 and len(page.sha256) == 64
    assert bool(page.etag) == index.validators
    assert indexpages.unchanged(page)
    last = index.requests[-1]
    assert last.conditional == index.validators and last.status == (304 if index.validators else 200)


def test_a_new_file_on_the_page_is_a_change(tmp_path: Path, index: SimpleIndex) -> None:
    page = indexpages.fetch(index.url + "numpy/")
    made = wheel(tmp_path / "wheels", "numpy", "2.4.7")
    os.utime(made, (2e9, 2e9))
    assert not indexpages.unchanged(page)


def test_another_status_an_error_or_a_304_nobody_asked_for_is_a_change(tmp_path: Path, index: SimpleIndex) -> None:
    missing = indexpages.fetch(index.url + "scipy/")
    assert missing.status == 404 and indexpages.unchanged(missing)  # still missing: unchanged
    wheel(tmp_path / "wheels", "scipy", "1.0")
    assert not indexpages.unchanged(missing)  # it appeared
    page = indexpages.fetch(index.url + "numpy/")
    index.close()
    assert not indexpages.unchanged(page)  # unreachable: changed, resolved again
    bare = indexpages.Page(page.url, 200)
    assert not indexpages.unchanged(bare)


def test_only_plain_index_urls_are_pages() -> None:
    assert indexpages.is_page_url("https://download.pytorch.org/whl/rocm7.2/torch/")
    assert not indexpages.is_page_url("file:///etc/passwd")
    assert not indexpages.is_page_url("https://user:secret@example.org/simple/torch/")
    with pytest.raises(OSError):
        indexpages.fetch("file:///etc/passwd")


def test_the_accept_header_is_pips_so_the_server_answers_json_as_it_does_pip() -> None:
    assert choose(indexpages.ACCEPT) == JSON


def test_checks_ask_each_page_once_per_run(index: SimpleIndex) -> None:
    page = indexpages.fetch(index.url + "numpy/")
    checks = indexpages.Checks()
    before = len(index.requests)
    assert checks.unchanged(page) and checks.unchanged(page)
    assert len(index.requests) - before == 1 == checks.requests
