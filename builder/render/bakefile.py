"""The bake file: one target per image, one group per combination, in bake's JSON form.

`docker buildx bake -f images/docker-bake.json TARGET` rebuilds any image without Python; `builder build`
drives the same file. Targets are named after image tags (dots become dashes: bake allows [A-Za-z0-9_-]).
"""

from __future__ import annotations

import json
from typing import Any

from builder.core import tags
from builder.render.dockerfile import RenderedCell, bake_target
from builder.render.stages import NameClash

DEFAULT_GROUP = "default"


class BakeNameClash(NameClash):
    """Two images or combinations would share one bake name."""


def group_of(rendered: RenderedCell) -> str:
    """The bake group of a combination: the fan-out unit of the scheduled workflow."""
    return "combo-" + bake_target(rendered.group)


def definition(rendered: list[RenderedCell], context: str) -> dict[str, Any]:
    """bake's JSON: targets with Dockerfile stage, tags (the readable and the content-named local ref) and labels."""
    targets: dict[str, Any] = {}
    groups: dict[str, list[str]] = {DEFAULT_GROUP: []}
    for r in rendered:
        if r.target in targets:
            other = next(o.cell.tag for o in rendered if o.target == r.target)
            raise BakeNameClash(f"images {other!r} and {r.cell.tag!r} would share the bake target name "
                                f"{r.target!r} (bake names allow [A-Za-z0-9_-]: '.' becomes '-'): give them tags "
                                "that differ otherwise")
        immutable = tags.immutable_tag(r.cell.tag, r.content_hash)
        targets[r.target] = {
            "context": context,
            "dockerfile": f"{r.group}/Dockerfile",
            "target": r.stage,
            "tags": [tags.local_ref(r.cell.image, r.cell.tag), tags.local_ref(r.cell.image, immutable)],
            "labels": r.labels,
        }
        groups[DEFAULT_GROUP].append(r.target)
        groups.setdefault(group_of(r), []).append(r.target)
    clash = set(groups) & set(targets)
    if clash:
        raise BakeNameClash(f"bake names used by both a group and a target: {', '.join(sorted(clash))}")
    return {"group": {name: {"targets": members} for name, members in groups.items()}, "target": targets}


def dumps(definition_: dict[str, Any]) -> bytes:
    return (json.dumps(definition_, indent=2, sort_keys=True) + "\n").encode()
