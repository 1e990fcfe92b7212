"""Hostile BuildKit records: another build's steps that mention, echo or imitate the factory's step mark are never
taken for the factory's, so `publish --by-family` never prunes their cache (builder.buildkit.records).

The records have the shape of a real `docker buildx du --format json` (tests/data/buildx/du-records.jsonl: the
`Type` values and the `mount / from exec ARGS` / `cached mount DEST from exec ARGS with id "/ID"` descriptions)."""

from __future__ import annotations

import json

import pytest

from builder.buildkit import records

START, CLAMP = records.STEP_START, records.STEP_CLAMP
OURS = f"/bin/sh -c {START}  && echo ours > /ours  && {CLAMP}"  # a template step's ARGS, as BuildKit joins them

FOREIGN = {
    "echoes the mark": "mount / from exec /bin/sh -c echo 'touch --no-dereference --date=@0' > /mark",
    "echoes the whole start and clamp": f"mount / from exec /bin/sh -c echo '{START}  && {CLAMP}' > /whole",
    "runs the clamp after its own start": f"mount / from exec /bin/sh -c make  && {CLAMP}",
    "starts like the template, clamps otherwise":
        f"mount / from exec /bin/sh -c {START}  && make  && find / -exec touch --no-dereference --date=@0 -- {{}} +",
    "the clamp then more": f"mount / from exec {OURS} ; rm -rf /srv",
    "the clamp in a comment": f"mount / from exec /bin/sh -c make # {START}  && {CLAMP}",
    "the clamp commented out": f"mount / from exec /bin/sh -c {START}  && make # && {CLAMP}",
    "a start glued to more": f"mount / from exec /bin/sh -c {START}x  && {CLAMP}",
    "a second line": f"mount / from exec /bin/sh -c {START}  && cat <<EOF\nx\nEOF\n  && {CLAMP}",
    "another shell": f"mount / from exec /bin/bash -c {START}  && make  && {CLAMP}",
    "exec form": f"mount / from exec {START}  && make  && {CLAMP}",
    "a vertex name, not a record's": f"[build 2/3] RUN {START}  && make  && {CLAMP}",
    "another mount point": f"mount /data from exec {OURS}",
    "a prefix": f"x mount / from exec {OURS}",
    "the mark as a cache id": 'cached mount /tmp from exec /bin/sh -c make with id "/touch --no-dereference '
                              '--date=@0 -- {} +"',
    "a quote in the cache id": f'cached mount /tmp from exec {OURS} with id "/a" with id "/b"',
    "oversized": f"mount / from exec /bin/sh -c {START}  && {'x' * (records.MAX_DESCRIPTION + 1)}  && {CLAMP}",
}


def _record(id_: str, description: str, type_: str = records.STEP, parents: list[str] | None = None) -> str:
    return json.dumps({"CreatedAt": "2026-11-28 20:08:31.134195464 +0000 UTC", "Description": description,
                       "ID": id_, "LastUsedAt": "Less than a second ago", "Mutable": False, "Parents": parents,
                       "Reclaimable": True, "Shared": True, "Size": "12.38kB", "Type": type_, "UsageCount": 1})


def test_the_template_s_own_forms_are_ours() -> None:
    found = records.parse("\n".join([
        _record("step", f"mount / from exec {OURS}"),
        _record("mount", f'cached mount /var/cache/apt from exec {OURS} with id "/rif-apt-debian-12"',
                records.CACHE_MOUNT)]))
    assert records.ours(found) == {"step", "mount"}


@pytest.mark.parametrize("description", FOREIGN.values(), ids=FOREIGN.keys())
def test_another_build_s_step_that_names_the_mark_is_not_ours(description: str) -> None:
    type_ = records.CACHE_MOUNT if description.startswith("cached mount") else records.STEP
    found = records.parse("\n".join([
        _record("theirs", description, type_),
        _record("workdir", "[build 3/3] WORKDIR /root", parents=["theirs"])]))  # built on theirs: theirs too
    assert records.ours(found) == set()


@pytest.mark.parametrize("type_", ["source.local", "frontend", "internal", "", records.CACHE_MOUNT])
def test_the_template_s_step_text_in_a_record_of_another_type_is_not_ours(type_: str) -> None:
    assert records.ours(records.parse(_record("other", f"mount / from exec {OURS}", type_))) == set()


@pytest.mark.parametrize("description", ["mount / from exec /bin/sh -c make", "[build 2/2] COPY . /srv",
                                         "[build 2/2] WORKDIR /srv", "[build 2/2] WORKDIR /root\n",
                                         "local source for context"])
def test_a_record_built_on_ours_that_is_not_the_template_s_is_another_build_s(description: str) -> None:
    """A user's build FROM a factory image chains onto the factory's records (seen on the real engine: the
    listing's 9or4nn... is `echo child` on our WORKDIR): it stays, and keeps what it stands on."""
    found = records.parse("\n".join([_record("step", f"mount / from exec {OURS}"),
                                     _record("child", description, parents=["step"])]))
    assert records.ours(found) == {"step"}
