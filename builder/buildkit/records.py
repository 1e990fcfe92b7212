"""BuildKit's cache records of the factory's own steps: those a family wave may prune, and no other build's.

Every RUN of templates/Dockerfile.j2 starts by noting the time (STEP_START) and ends by setting the times of what it
wrote (STEP_CLAMP). BuildKit describes the record of such a step as `mount / from exec /bin/sh -c COMMAND` and the
step's cache mounts as `cached mount DEST from exec /bin/sh -c COMMAND with id "/ID"` (its exec op's Args joined by
spaces: solver/llbsolver/ops/exec.go in moby/buildkit; the shapes of tests/data/buildx/du-records.jsonl, a real
`buildx du --format json`). A record is the factory's only when its whole description has that form, the command
starting with the mark's start and ending with its whole clamp: a step that merely mentions or echoes the mark (a
user's `echo`, a comment, a cache id) is another build's. A record built on one of the factory's that names no
command of its own (an image stage's WORKDIR, an empty description) is the factory's too, and has to go with them:
BuildKit prunes a record only once no other record holds it as a parent. One that runs a command of another form
(a user's build FROM a factory image) is never the factory's. `buildx du --format json` lists the records, one JSON
object a line; the listing is read bounded and each line parsed on its own (a bad line costs only itself).
"""

from __future__ import annotations

import re
import subprocess
import tempfile

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from builder.buildkit.builders import BuildKit

STEP_START = "T=$(date +%s)"  # the template's `start`: every RUN's command begins with it
STEP_CLAMP = ('find / -xdev $(awk \'$5 != "/" { printf "-path %s -prune -o ", $5 }\' /proc/self/mountinfo)'
              ' -newermt "@$T" -exec touch --no-dereference --date=@0 -- {} +')  # the template's `clamp`, whole
STEP = "regular"  # the Type of a step's record
CACHE_MOUNT = "exec.cachemount"  # the Type of a cache mount's
# The template's last step of an image stage: `WORKDIR /root` or the user's home (BuildKit names it after the stage).
WORKDIR = re.compile(r"\[[A-Za-z0-9._-]+ [0-9]+/[0-9]+\] WORKDIR (?:/root|/home/[a-z_][a-z0-9_-]*)")
COMMENT = re.compile(r"(?:^|\s)#")  # a shell comment: the template writes none (a quoted value's # is no word's start)
MAX_DESCRIPTION = 1 << 20  # a description longer than this is no step of the template's (a torch step: ~1 kB)
MAX_LISTING = 64 << 20  # bytes of `buildx du` output read: a builder with ~100k records
LIST_TIMEOUT_S = 120


class Record(BaseModel):
    """One cache record, as `buildx du --format json` describes it (its other keys are not needed here)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(alias="ID", pattern=r"^[a-z0-9]{1,64}$")
    parents: tuple[str, ...] = Field(default=(), alias="Parents")
    description: str = Field(default="", alias="Description")
    type: str = Field(default="", alias="Type")

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


def step_forms() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """The whole descriptions of a template step's record and of its cache mounts' (read at each call, so a test
    may narrow STEP_START to its own steps)."""
    command = (rf"/bin/sh -c {re.escape(STEP_START)}[ \t][^\n]*[ \t]&& {re.escape(STEP_CLAMP)}")
    return (re.compile(rf"mount / from exec {command}"),
            re.compile(rf'cached mount /[^\s"]* from exec {command} with id "/[A-Za-z0-9][A-Za-z0-9._-]*"'))


def is_step(record: Record) -> bool:
    """Whether a record is one of the template's steps or their cache mounts: its whole description, never a part."""
    if len(record.description) > MAX_DESCRIPTION:
        return False
    step, cache_mount = step_forms()
    form = {STEP: step, CACHE_MOUNT: cache_mount}.get(record.type)
    return (form is not None and form.fullmatch(record.description) is not None
            and COMMENT.search(record.description) is None)


def names_no_command(record: Record) -> bool:
    """A record that runs nothing of its own (the template's WORKDIR at an image stage's end, a record with no
    description): it is whoever's its parents are."""
    return record.type == STEP and (not record.description or WORKDIR.fullmatch(record.description) is not None)


def ours(records: list[Record]) -> set[str]:
    """The IDs of the template's steps and their cache mounts, and of every record built on them that runs no
    command of its own."""
    mine = {r.id for r in records if is_step(r)}
    grew = True
    while grew:
        more = {r.id for r in records
                if r.id not in mine and names_no_command(r) and mine.intersection(r.parents)}
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
