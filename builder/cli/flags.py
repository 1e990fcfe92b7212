"""Flags several commands share, checked once: the images a command works on (`Selection`), how they are validated
(`Checks`), the build cache and the layers' compression.

A group of flags is a frozen dataclass whose fields are typer options; `grouped` hands typer the fields as options
and the command one object, so a command keeps few parameters and every command spells its flags alike.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from functools import wraps
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer

from builder.buildkit.export import Cache
from builder.cli.kit import (
    ApptainerOpt,
    CellOpt,
    GpuOpt,
    LocksOpt,
    MatchOpt,
    MatrixOpt,
    RevalidateOpt,
    WheelhouseOpt,
    wheel_source,
)
from builder.core.errors import usage_error
from builder.pipeline import jobs
from builder.pipeline.options import ValidateOptions
from builder.registry.address import check_registry, plain_http_ok
from builder.render.sources import WheelSource

F = TypeVar("F", bound=Callable[..., Any])
COMPRESSIONS = ("gzip", "zstd")

CacheRegistryOpt = Annotated[str | None, typer.Option(
    "--cache-registry", metavar="HOST/NS", help=(
        "Import BuildKit's cache from, and export it to, HOST/NS/buildcache:<target> (every stage), so a cold "
        "runner rebuilding after a small change reinstalls nothing unchanged. Credentials: docker login."))]
CompressionOpt = Annotated[str, typer.Option("--compression", metavar="gzip|zstd", help=(
    "The layers' compression: gzip (default: every Docker and containerd client pulls it) or zstd (faster to pull "
    "and unpack; Docker 23+, containerd 1.5+)."))]


@dataclasses.dataclass(frozen=True)
class Selection:
    """Which images a command works on, and where their wheels come from."""

    matrix: MatrixOpt = Path("matrix.yaml")
    cell: CellOpt = None
    match: MatchOpt = None
    wheelhouse: WheelhouseOpt = None
    locks: LocksOpt = None
    shard: Annotated[str | None, typer.Option("--shard", metavar="K/N", help=(
        "Only the K-th of N interleaved slices of the combinations (a combination's images stay together)."))] = None

    def source(self) -> WheelSource:
        return wheel_source(self.wheelhouse, self.locks)

    def jobs(self) -> list[jobs.Job]:
        """The selected images, as jobs (an invalid matrix or selection stops here, exit 2)."""
        return jobs.shard_jobs(jobs.matrix_jobs(self.matrix, self.cell, self.match, self.source()), self.shard)


@dataclasses.dataclass(frozen=True)
class Checks:
    """How the images a command builds or pushes are validated."""

    gpu: GpuOpt = False
    apptainer: ApptainerOpt = False
    revalidate: RevalidateOpt = False

    def options(self) -> ValidateOptions:
        return ValidateOptions(gpu=self.gpu, apptainer=self.apptainer, reuse=not self.revalidate)


NO_CHECKS = Checks()  # the defaults (grouped gives typer each field's own)


def grouped(fn: F) -> F:
    """typer sees each field of a dataclass-typed parameter as an option of its own (named by the field's
    typer.Option); the command gets the dataclass, built from them."""
    signature = inspect.signature(fn, eval_str=True)
    params: list[inspect.Parameter] = []
    groups: dict[str, tuple[type[Any], list[str]]] = {}
    for p in signature.parameters.values():
        if not (isinstance(p.annotation, type) and dataclasses.is_dataclass(p.annotation)):
            params.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY))  # click passes keywords alone
            continue
        hints = get_type_hints(p.annotation, include_extras=True)
        fields = [f for f in dataclasses.fields(p.annotation) if f.init]
        groups[p.name] = (p.annotation, [f.name for f in fields])
        params += [inspect.Parameter(f"{p.name}__{f.name}", inspect.Parameter.KEYWORD_ONLY, default=f.default,
                                     annotation=hints[f.name]) for f in fields]

    @wraps(fn)
    def wrapper(**kwargs: Any) -> Any:
        for name, (cls, fields) in groups.items():
            kwargs[name] = cls(**{f: kwargs.pop(f"{name}__{f}") for f in fields})
        return fn(**kwargs)

    wrapper.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]  # what typer reads
    wrapper.__annotations__ = {q.name: q.annotation for q in params}
    return wrapper  # type: ignore[return-value]


def compression(name: str) -> str:
    if name not in COMPRESSIONS:
        raise usage_error("--compression", f"{name!r}: {' or '.join(COMPRESSIONS)}")
    return name


def cache(cache_registry: str | None, insecure: frozenset[str], write: bool = True) -> Cache | None:
    """BuildKit's registry cache at HOST/NS/buildcache, over plain HTTP only where the registry client would;
    write=False (publish --no-push): imported only, never exported."""
    if not cache_registry:
        return None
    checked = check_registry(cache_registry, "--cache-registry")
    return Cache(f"{checked}/buildcache", plain_http_ok(checked.split("/", 1)[0], insecure), write=write)
