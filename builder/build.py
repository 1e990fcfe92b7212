"""Stage 3: rendered cell -> built image, with the build log streamed live.

docker SDK's images.build() returns the log only at the end; the low-level api.build generator
gives each line as it happens, so a maintainer watches a 10-minute build instead of waiting on it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import docker
from docker.errors import APIError, DockerException

from builder.render import RenderedCell

LOG_TAIL_LINES = 40


@dataclass
class BuildResult:
    rendered: RenderedCell
    ref: str
    ok: bool
    image_id: str | None = None
    seconds: float = 0.0
    error: str | None = None
    log_tail: list[str] = field(default_factory=list)


def build_image(client: docker.DockerClient, rendered: RenderedCell, context: Path, ref: str,
                on_line: Callable[[str], None] = lambda line: None) -> BuildResult:
    """Build context into ref; a failure is returned (with the log's tail), never raised."""
    tail: deque[str] = deque(maxlen=LOG_TAIL_LINES)
    start = time.monotonic()
    image_id: str | None = None
    error: str | None = None
    try:
        for chunk in client.api.build(path=str(context), tag=ref, rm=True, forcerm=True, pull=False,
                                      decode=True):
            for line in _lines(chunk):
                tail.append(line)
                on_line(line)
            if "error" in chunk:
                error = str(chunk["error"]).strip()
            aux = chunk.get("aux")
            if isinstance(aux, dict) and "ID" in aux:
                image_id = str(aux["ID"])
    except (APIError, DockerException) as exc:
        error = f"Docker engine error: {exc}"
    seconds = time.monotonic() - start
    if error is None and image_id is None:
        error = "the build stream ended without an image ID"
    return BuildResult(rendered, ref, error is None, image_id, seconds, error, list(tail))


def _lines(chunk: dict[str, object]) -> list[str]:
    text = str(chunk.get("stream") or chunk.get("status") or chunk.get("error") or "")
    return [line for line in text.rstrip("\n").split("\n") if line.strip()]
