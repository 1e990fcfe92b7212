"""The factory's own BuildKit cache records: read from `buildx du --format json` as hostile input, and picked so a
prune takes them and every record built on them, never another build's."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from builder.buildkit import records
from builder.buildkit.builders import BuildKit

MARKED = f"mount / from exec /bin/sh -c pip install x && find / -exec {records.STEP_MARK} -- {{}} +"


def _line(id_: str, parents: list[str] | None = None, description: str = "", **extra: Any) -> str:
    return json.dumps({"ID": id_, "Parents": parents, "Description": description, "Size": "1kB", **extra})


def test_a_listing_line_that_is_not_a_record_costs_only_itself() -> None:
    listing = "\n".join([_line("aaa", None, MARKED), "not json", json.dumps({"ID": "BAD ID; rm -rf /"}),
                         json.dumps([1, 2]), _line("bbb", ["aaa"]), "", json.dumps({"Description": "no id"})])
    found = records.parse(listing)
    assert [(r.id, r.parents) for r in found] == [("aaa", ()), ("bbb", ("aaa",))]


def test_ours_are_the_marked_steps_and_everything_built_on_them_never_another_build_s() -> None:
    found = records.parse("\n".join([
        _line("base", None, "pulled from docker.io/library/debian:12"),  # the base image: a user's too
        _line("step1", ["base"], MARKED),
        _line("step2", ["step1"], MARKED),
        _line("workdir", ["step2"], "[runtime-gfx1151 5/5] WORKDIR /root"),  # names no command
        _line("leaf", ["workdir"], ""),
        _line("pipcache", None, f'cached mount /tmp from exec {MARKED} with id "/rif-pip"'),
        _line("theirs", ["base"], "mount / from exec /bin/sh -c make"),
        _line("theirs2", ["theirs"], "[build 2/2] WORKDIR /root"),
    ]))
    assert records.ours(found) == {"step1", "step2", "workdir", "leaf", "pipcache"}
    assert records.ours(records.parse(_line("theirs", None, "mount / from exec make"))) == set()


def test_the_filter_names_exactly_those_records() -> None:
    assert records.id_filter({"bbb", "aaa"}) == 'id~="^(aaa|bbb)$"'


def test_a_listing_is_read_bounded_and_a_failed_or_oversized_one_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    answer: dict[str, Any] = {"rc": 0, "out": (_line("aaa", None, MARKED) + "\n").encode()}
    asked: list[list[str]] = []

    def run(cmd: list[str], stdout: Any, **kwargs: Any) -> subprocess.CompletedProcess[bytes]:
        asked.append(cmd)
        stdout.write(answer["out"])
        return subprocess.CompletedProcess(cmd, answer["rc"])

    monkeypatch.setattr(subprocess, "run", run)
    found = records.listed(BuildKit(name="b1"))
    assert found is not None and [r.id for r in found] == ["aaa"]
    assert asked[0] == ["docker", "buildx", "du", "--builder", "b1", "--format", "json"]
    monkeypatch.setattr(records, "MAX_LISTING", len(answer["out"]) - 1)
    assert records.listed(BuildKit()) is None  # larger than read: nothing is pruned on half a listing
    monkeypatch.setattr(records, "MAX_LISTING", 1 << 20)
    answer["rc"] = 1
    assert records.listed(BuildKit()) is None  # an old buildx without --format json, a builder gone
