"""BuildKit's cache records of the factory's own steps: those a family wave may prune, and no other build's.

Every RUN of templates/Dockerfile.j2 ends by setting the times of what it wrote (STEP_MARK), so BuildKit's
description of its record, and of its cache mounts, says so. A record built on top of one of those (an image
stage's WORKDIR, whose description names no command) is the factory's too, and it has to go with them: BuildKit
prunes a record only once no other record holds it as a parent. `buildx du --format json` lists the records, one
JSON object a line; the listing is read bounded and each line parsed on its own (a bad line costs only itself).
"""

from __future__ import annotations

import subprocess
import tempfile

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from builder.buildkit.builders import BuildKit

STEP_MARK = "touch --no-dereference --date=@0"
MAX_LISTING = 64 << 20  # bytes of `buildx du` output read: a builder with ~100k records
LIST_TIMEOUT_S = 120


class Record(BaseModel):
    """One cache record, as `buildx du --format json` describes it (its other keys are not needed here)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(alias="ID", pattern=r"^[a-z0-9]{1,64}$")
    parents: tuple[str, ...] = Field(default=(), alias="Parents")
    description: str = Field(default="", alias="Description")

    @field_validator("parents", mode="before")
    @classmethod
    def _none_is_empty(cls, value: object) -> object:
        return () if value is None else value


def parse(listing: str) -> list[Record]:
    """The records of a listing; a line that is not one is skipped."""
    found = []
    for line in listing.splitlines():
        try:
            found.append(Record.model_validate_json(line))
        except ValidationError:
            continue
    return found


def ours(records: list[Record]) -> set[str]:
    """The IDs of the records of the factory's steps and of every record built on one of them."""
    mine = {r.id for r in records if STEP_MARK in r.description}
    grew = True
    while grew:
        more = {r.id for r in records if r.id not in mine and mine.intersection(r.parents)}
        mine |= more
        grew = bool(more)
    return mine


def id_filter(ids: set[str]) -> str:
    """A `buildx prune` filter that takes exactly these records (IDs are checked: [a-z0-9] only)."""
    return f'id~="^({"|".join(sorted(ids))})$"'


def listed(kit: BuildKit) -> list[Record] | None:
    """The builder's records, or None when buildx cannot list them (too old for --format json, builder gone) or
    the listing is larger than MAX_LISTING."""
    try:
        with tempfile.TemporaryFile() as out:
            done = subprocess.run([*kit.buildx("du"), "--format", "json"], stdout=out, stderr=subprocess.DEVNULL,
                                  timeout=LIST_TIMEOUT_S, check=False)
            out.seek(0)
            data = out.read(MAX_LISTING + 1)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0 or len(data) > MAX_LISTING:
        return None
    return parse(data.decode("utf-8", errors="replace"))
