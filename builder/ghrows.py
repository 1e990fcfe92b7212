"""Images -> the rows of a GitHub Actions `strategy.matrix`: one job per image, within GitHub's limit.

The publish workflows read these rows as `${{ matrix.<key> }}`; tests/test_ghrows.py checks that every
key a workflow reads is in every row.
"""

from __future__ import annotations

import json

from builder.plan import ImagePlan, usage_error

MAX_JOBS = 256  # GitHub Actions' limit on the jobs of one strategy.matrix


def row(plan: ImagePlan) -> dict[str, str]:
    """One job per image: `tag` selects it (builder publish --cell TAG), `tags` are all it is pushed as."""
    c = plan.content
    return {"tag": c.tag, "tags": " ".join(plan.tags), "os": c.os, "platform": c.platform, "torch": c.torch,
            "gfx": c.gfx or "", "flavor": c.flavor, "channel": c.channel}


def matrix_json(plans: list[ImagePlan]) -> str:
    """One line, for `echo "cells=$(builder matrix --format github)" >> $GITHUB_OUTPUT` and fromJSON()."""
    if len(plans) > MAX_JOBS:
        raise usage_error("--format github", f"{len(plans)} images exceed GitHub's {MAX_JOBS} jobs per matrix: "
                                             "split them with --shard K/N")
    return json.dumps({"include": [row(p) for p in plans]}, separators=(",", ":"))
