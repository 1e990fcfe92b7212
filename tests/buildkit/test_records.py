"""The factory's own BuildKit cache records: read from `buildx du --format json` as hostile input, and picked so a
prune takes them and every record built on them, never another build's."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from builder.buildkit import records
from builder.buildkit.builders import BuildKit
from tests.fakes.checkout import DATA

COMMAND = f"/bin/sh -c {records.STEP_START}  && pip install x  && {records.STEP_CLAMP}"
MARKED = f"mount / from exec {COMMAND}"
# A real `docker buildx du --format json` (docker 28.5.2, buildx 0.29.1, containerd image store) after three builds:
# a step of the template's form with a cache mount and a WORKDIR (built into an image), another build whose steps
# echo the mark and the whole start and clamp, and a third FROM the first's image; and an older busybox probe (a
# step whose clamp is another find's, and a failed step of the template's form whose cache mount stayed).
LISTING = DATA / "buildx" / "du-records.jsonl"


def _line(id_: str, parents: list[str] | None = None, description: str = "", type_: str = "regular",
          **extra: Any) -> str:
    """A record as buildx du prints it (the keys of LISTING's lines)."""
    return json.dumps({"CreatedAt": "2026-11-28 20:08:31.134195464 +0000 UTC", "Description": description,
                       "ID": id_, "LastUsedAt": "Less than a second ago", "Mutable": False, "Parents": parents,
                       "Reclaimable": True, "Shared": True, "Size": "12.38kB", "Type": type_, "UsageCount": 1,
                       **extra})


def test_a_listing_line_that_is_not_a_record_costs_only_itself() -> None:
    listing = "\n".join([_line("aaa", None, MARKED), "not json", json.dumps({"ID": "BAD ID; rm -rf /"}),
                         json.dumps([1, 2]), _line("bbb", ["aaa"]), "", json.dumps({"Description": "no id"})])
    found = records.parse(listing)
    assert [(r.id, r.parents) for r in found] == [("aaa", ()), ("bbb", ("aaa",))]


def test_ours_are_the_template_s_steps_and_what_is_built_on_them_without_a_command_never_another_build_s() -> None:
    found = records.parse("\n".join([
        _line("base", None, "pulled from docker.io/library/debian:12"),  # the base image: a user's too
        _line("step1", ["base"], MARKED),
        _line("step2", ["step1"], MARKED),
        _line("workdir", ["step2"], "[runtime-gfx1151 5/5] WORKDIR /root"),  # names no command
        _line("leaf", ["workdir"], ""),
        _line("pipcache", None, f'cached mount /tmp from exec {COMMAND} with id "/rif-pip"', "exec.cachemount"),
        _line("theirs", ["base"], "mount / from exec /bin/sh -c make"),
        _line("theirs2", ["theirs"], "[build 2/2] WORKDIR /root"),
        _line("child", ["workdir"], "mount / from exec /bin/sh -c make"),  # a user's build FROM our image
        _line("child2", ["child"], "[build 3/3] WORKDIR /root"),
    ]))
    assert records.ours(found) == {"step1", "step2", "workdir", "leaf", "pipcache"}
    assert records.ours(records.parse(_line("theirs", None, "mount / from exec make"))) == set()


def test_in_a_real_listing_only_the_template_s_form_is_ours_not_a_step_that_echoes_the_mark() -> None:
    found = records.parse(LISTING.read_text())
    assert len(found) == len(LISTING.read_text().splitlines())  # every real line is a record
    by_id = {r.id: r for r in found}
    mine = records.ours(found)
    assert mine == {"tpeegggl0ay6kgg3ejyrcea0n",  # RUN T=... && echo ours > /ours && <clamp>
                    "en8ftt4pghklmhyc50kncr72z",  # its cache mount
                    "c5e2guyox8iiolfo50mq9i7wb",  # the WORKDIR /root after it
                    "xvj6zx6vz33w22h1ecz2sg5gk"}  # the failed probe step's cache mount: the template's form
    for theirs in ("mthm4a05vvkkds96yq7qw4xbe", "hliift2carfno4siazxvluxp6", "t3jfnp8bkme1hx92ij4uh3z4l",
                   "wx4omk5rtlqo6ntjml5jcrlgh", "i7tfnv76totttlhgwmqwbuy9g", "tv94krzmh5zbdn4bb06fu8jn1"):
        assert "touch --no-dereference --date=@0" in by_id[theirs].description  # each names the mark ...
        assert theirs not in mine  # ... and is another build's
    assert by_id["r3xs2381u8iboa3z252a3obgd"].parents == ("hliift2carfno4siazxvluxp6",)  # their WORKDIR: theirs
    assert "r3xs2381u8iboa3z252a3obgd" not in mine
    assert by_id["9or4nnauzul8jwooyhu40vlas"].parents == ("c5e2guyox8iiolfo50mq9i7wb",)  # FROM our image
    assert "9or4nnauzul8jwooyhu40vlas" not in mine


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
