"""`builder plan`: what each image needs, decided from the registry's answers alone (no engine).

Per image, the first moving tag (its own cell's readable tag) and the immutable tag are read: the immutable tag
absent, the image is to be built (also when the cell tag still holds its content: a deleted immutable tag is
published again, never reported as there); present and holding this content hash (its config read only when the
cell tag names another manifest), its tags move where they point elsewhere. Its other moving tags (`latest`, the
cells of a shared image) cost one manifest read each.

The look-ups run on a bounded thread pool against one RegistryClient: it keeps no connection between requests
(each request opens its own, with its own watchdog), its token cache is a dict written whole under the GIL, and
every request takes what is left of the one command-wide deadline (RegistryClient.until). The first image of each
repository is looked up before the others (the repositories side by side), so the registry's auth challenge is
answered once per repository rather than by every worker.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar

from builder.core.tags import HASH_LABEL
from builder.publish.promote import Target
from builder.registry.client import Manifest
from builder.registry.errors import RegistryError


class Job(Protocol):
    """What the plan reads of an image to build (builder.pipeline.jobs.Job): its names, content and record."""

    @property
    def tag(self) -> str: ...
    @property
    def repository(self) -> str: ...
    @property
    def tags(self) -> list[str]: ...
    @property
    def content_hash(self) -> str: ...
    @property
    def combination(self) -> str: ...
    @property
    def immutable_tag(self) -> str: ...


J = TypeVar("J", bound=Job)
Action = Literal["build", "move-tags", "skip", "error"]
WORKERS = 32  # concurrent look-ups: enough to hide a registry's latency, few enough to spare it
DEADLINE_S = 900.0  # the whole plan's look-ups, all together


@dataclass
class Decision(Generic[J]):
    """One image's action and why, with what the registry said (the manifest its tags move to)."""

    job: J
    action: Action
    reason: str
    manifest: Manifest | None = None  # the published manifest of this content (move-tags, skip)
    moves: list[str] = field(default_factory=list)  # the moving tags that point elsewhere (or nowhere)
    moved: list[str] = field(default_factory=list)  # those moved by this run (--move-tags)

    def as_json(self) -> dict[str, Any]:
        return {"tag": self.job.tag, "repository": self.job.repository, "combination": self.job.combination,
                "immutable_tag": self.job.immutable_tag,
                "content_hash": self.job.content_hash, "action": self.action, "reason": self.reason,
                "digest": self.manifest.digest if self.manifest else None, "tags": list(self.job.tags),
                "moves": self.moves, "moved": self.moved}


def plan(target: Target, todo: list[J], workers: int = WORKERS,
         on_done: Callable[[Decision[J]], None] = lambda d: None) -> list[Decision[J]]:
    """Every job's Decision, in the jobs' order; the look-ups run concurrently (at most `workers` at once)."""
    if target.api.ends is None:
        target.api.until(DEADLINE_S)

    def one(job: J) -> Decision[J]:
        found = decide(target, job)
        on_done(found)
        return found

    # The first image of each repository first, the repositories side by side (a token is per repository): the
    # registry's challenge is answered (a token fetched) once per repository, not by every worker at once.
    firsts = sorted({job.repository: i for i, job in reversed(list(enumerate(todo)))}.values())
    rest = sorted(set(range(len(todo))) - set(firsts))
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
        done = dict(zip(firsts, pool.map(lambda i: one(todo[i]), firsts), strict=True))
        done.update(zip(rest, pool.map(lambda i: one(todo[i]), rest), strict=True))
    return [done[i] for i in range(len(todo))]


def decide(target: Target, job: J) -> Decision[J]:
    """build, move-tags or skip (or error: the registry could not say), and why."""
    try:
        return _decide(target, job)
    except RegistryError as exc:
        return Decision(job, "error", str(exc))


def _decide(target: Target, job: J) -> Decision[J]:
    api, repo = target.api, target.repository(job.repository)
    immutable = job.immutable_tag
    first = job.tags[0] if job.tags else immutable
    current = api.manifest(repo, first)
    holds = current is not None and _hash_of(target, repo, current) == job.content_hash
    found = api.manifest(repo, immutable) if first != immutable else current  # the one request more per image
    if found is None:
        if holds:
            why = f"{immutable} is gone (its content is still under {first}): built again to restore it"
        else:
            why = f"{'nothing published under' if current is None else 'new content: no image under'} {immutable}"
        return Decision(job, "build", why, moves=list(job.tags))
    if not (holds and current is not None and found.digest == current.digest):
        held = _hash_of(target, repo, found)
        if held != job.content_hash:
            raise RegistryError(f"{api.address}/{repo}:{immutable} exists with content hash {held!r}, not "
                                f"{job.content_hash}: an immutable tag is never overwritten; delete it by hand if "
                                "it is wrong")
    published = found
    digests: dict[str, str | None] = {first: current.digest if current else None}
    for tag in job.tags[1:]:
        digests[tag] = api.digest(repo, tag)
    moves = [t for t in job.tags if digests.get(t) != published.digest]
    if moves:
        return Decision(job, "move-tags", f"published as {immutable}; {', '.join(moves)} point elsewhere",
                        published, moves)
    return Decision(job, "skip", f"published as {immutable}, every tag on it", published)


def _hash_of(target: Target, repo: str, manifest: Manifest) -> str | None:
    """The content hash a published image's config carries (None: not one of the factory's images)."""
    return target.api.config(repo, manifest).labels.get(HASH_LABEL)


def move_tags(target: Target, decisions: list[Decision[J]], workers: int = WORKERS) -> None:
    """Move the tags of every `move-tags` decision to its published manifest, registry-side by digest (no
    engine, no layer moves); a failed move turns that decision into an error."""
    todo = [d for d in decisions if d.action == "move-tags" and d.manifest is not None]

    def one(decision: Decision[J]) -> None:
        assert decision.manifest is not None
        job = decision.job
        promoted = target.promote(job.repository, job.tags, decision.manifest, own=job.tag)
        if promoted.failure is not None:
            decision.action, decision.reason = "error", f"moving {', '.join(decision.moves)}: {promoted.failure}"
        decision.moved = list(promoted.moved)

    if todo:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
            list(pool.map(one, todo))

