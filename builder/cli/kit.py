"""The command line's plumbing: shared options, exit codes, error handling, signals and help layout.

Every `builder` command uses these, so bad input, interruptions and surprises end the same way everywhere.
"""

from __future__ import annotations

import errno
import os
import signal
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from functools import wraps
from importlib.metadata import version
from pathlib import Path
from types import FrameType
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
import typer.rich_utils as typer_help
from rich.table import Table
from rich.text import Text

from builder.buildkit.builders import NETWORKS, BuildKit
from builder.buildkit.engine import EngineUnavailable
from builder.cli import console
from builder.core import aptwords, safefs, wheels
from builder.core.errors import InputError, usage_error
from builder.registry.credentials import CredentialError
from builder.registry.errors import RegistryError
from builder.render import imagetree
from builder.render.lockfile import LockProblem
from builder.render.resolve import LockError
from builder.render.sources import WheelSource
from builder.render.stages import NameClash

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_SIGINT, EXIT_SIGTERM = 0, 1, 2, 130, 143
# what the file system says of a path a user named (--out, --dest, --record): bad input, said in one line
FILE_FAULTS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.ENOTDIR, errno.EISDIR, errno.EEXIST,
                         errno.ENAMETOOLONG, errno.EACCES, errno.EPERM, errno.ELOOP, errno.ENOENT, errno.EFBIG})

P = ParamSpec("P")
R = TypeVar("R")

PRODUCTION_MATRIX, PRODUCTION_IMAGES = Path("matrix.yaml"), Path("images")
MatrixOpt = Annotated[Path, typer.Option("--matrix", "-m", help="Matrix file (YAML).")]
WheelhouseOpt = Annotated[Path | None, typer.Option(
    "--wheelhouse", help="Install wheels from this directory (--no-index) instead of the cells' index URLs.",
    exists=True, file_okay=False)]
LocksOpt = Annotated[Path | None, typer.Option(
    "--locks", metavar="DIR", file_okay=False,
    help="Build exactly what DIR's lock files pin (`builder lock --out DIR`): the base image by digest and every "
         "wheel by sha256 (--require-hashes). A missing or stale lock stops the run before any build.")]
CellOpt = Annotated[list[str] | None, typer.Option(
    "--cell", metavar="TAG", help="Only cells with this tag (repeatable).")]
MatchOpt = Annotated[str | None, typer.Option(
    "--match", metavar="GLOB", help="Only cells whose tag matches this glob (e.g. 'rocm7.2_*_gfx94X-dcgpu_*').")]
RunnerDiskOpt = Annotated[str | None, typer.Option(
    "--runner-disk", metavar="SIZE", help=(
        "Plan on one runner with this disk free (60G, 10T, 512M or bytes; binary units) instead of the pool in "
        "runners.yaml beside the matrix: a combination whose estimated peak exceeds it is split into rows by GPU "
        "family (docs/publishing.md)."))]
RunnerOpt = Annotated[str | None, typer.Option(
    "--runner", metavar="LABEL", help=(
        "Plan on this runner of the pool alone (with --runner-disk: the label of that one runner); each "
        "`--format github` row names the runner it runs on (publish-cells.yml runs it there)."))]
RegistryOpt = Annotated[str | None, typer.Option(
    "--registry", envvar="RIF_REGISTRY", metavar="HOST/NS",
    help="Push target REGISTRY/NAMESPACE (env RIF_REGISTRY); credentials: RIF_REGISTRY_USER and "
         "RIF_REGISTRY_PASSWORD, or docker login.")]
InsecureOpt = Annotated[list[str] | None, typer.Option(
    "--insecure-registry", metavar="HOST[:PORT]",
    help="Speak plain HTTP to this registry or token realm, and send it credentials (repeatable; as Docker's "
         "insecure-registries). Loopback needs none; everything else is HTTPS.")]
GpuOpt = Annotated[bool, typer.Option("--gpu", help="Also run the GPU checks, with the host's ROCm devices.")]
ApptainerOpt = Annotated[bool, typer.Option("--apptainer", help=(
    "Also validate under Apptainer: convert the image to a SIF and run torch-smoke in it as a non-root user with "
    "--containall, read-only (off by default: minutes per image)."))]
RevalidateOpt = Annotated[bool, typer.Option("--revalidate", help=(
    "Run the checks even where a pass of the same image (same ID, expectations, checks and engine) is on record "
    "in the cache; by default that pass is taken and the record says when it ran (validation_reused)."))]
BuilderOpt = Annotated[str | None, typer.Option(
    "--builder", envvar="RIF_BUILDER", metavar="NAME",
    help="The buildx builder that bakes (env RIF_BUILDER; `docker buildx ls`): a docker context's engine, or a "
         "docker-container, remote or Kubernetes BuildKit; default: buildx's current one. The images come back "
         "and are validated on the local engine (DOCKER_HOST).")]
BuildNetworkOpt = Annotated[str, typer.Option(
    "--build-network", envvar="RIF_BUILD_NETWORK", metavar="default|host",
    help="The network of RUN steps (env RIF_BUILD_NETWORK): default, BuildKit's own; host, the build host's "
         "(needs the network.host entitlement; for an engine without a bridge, as scripts/setup.sh's, which "
         "exports RIF_BUILD_NETWORK=host).")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", hidden=True,
                                        help="Accepted for old scripts: build logs always go to .rif/logs.")]
RecordOpt = Annotated[Path, typer.Option("--record", help="Where the JSON run record goes.")]


def needs_registry(registry: str | None) -> str:
    """--registry (or RIF_REGISTRY), which every command that pushes or plans against a registry needs."""
    if not registry:
        raise usage_error("--registry", "needs REGISTRY/NAMESPACE (or RIF_REGISTRY)")
    return registry


def wheel_source(wheelhouse_dir: Path | None, locks: Path | None = None) -> WheelSource:
    """Where images get their wheels: --wheelhouse and --locks, as absolute paths (every command alike), and whether
    the person running the command lets apt read a lock's loopback archive unsigned (RIF_APT_SNAPSHOT_TRUSTED)."""
    try:
        trusted = aptwords.trust_setting(os.environ.get(aptwords.TRUST_SETTING))
    except ValueError as exc:
        raise usage_error(aptwords.TRUST_SETTING, str(exc)) from None
    return WheelSource(wheelhouse_dir.resolve() if wheelhouse_dir else None, locks.resolve() if locks else None,
                       trusted)


def buildkit(builder: str | None, network: str) -> BuildKit:
    """--builder and --build-network, checked: where the bake runs and on which network."""
    if network not in NETWORKS:
        raise usage_error("--build-network", f"{network!r}: {' or '.join(NETWORKS)} (env RIF_BUILD_NETWORK)")
    if builder is not None and not builder.strip():
        raise usage_error("--builder", "an empty name (env RIF_BUILDER): name a builder `docker buildx ls` lists")
    return BuildKit(builder.strip() if builder else None, network)


class Progress(StrEnum):
    auto = "auto"
    plain = "plain"
    json = "json"


ProgressOpt = Annotated[Progress, typer.Option(
    "--progress", help="auto: a live view on a terminal, plain lines otherwise; plain: one line per stage (CI "
                       "logs); json: one JSON object per event. Build logs always go to .rif/logs/<tag>.log.")]


class Terminated(Exception):
    """SIGTERM, turned into an exception so cleanup and the run record happen as for Ctrl-C."""


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """Bad input exits 2 with every problem listed; interruptions 130/143; anything unexpected 1, with a log."""
    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            for problem in exc.problems:
                console.error(str(problem))
            raise typer.Exit(EXIT_BAD_INPUT) from exc
        except wheels.WheelhouseError as exc:
            for line in exc.problems:
                console.error(line)
            raise typer.Exit(EXIT_BAD_INPUT) from exc
        except LockProblem as exc:
            for stale in exc.problems:
                console.error(f"lock: {stale}")
            console.err.print("run `builder lock --matrix MATRIX --out DIR` (or `--update`) and commit the locks")
            raise typer.Exit(EXIT_BAD_INPUT) from exc
        except (EngineUnavailable, NotImplementedError, CredentialError, imagetree.TreeError, NameClash,
                LockError, safefs.OutputError) as exc:
            console.error(str(exc))
            raise typer.Exit(EXIT_BAD_INPUT) from exc
        except RegistryError as exc:  # the registry refused or is down before any image was touched
            console.error(f"registry: {exc}")
            raise typer.Exit(EXIT_FAILED) from exc
        except KeyboardInterrupt:
            console.error("interrupted")
            raise typer.Exit(EXIT_SIGINT) from None
        except Terminated:
            console.error("terminated")
            raise typer.Exit(EXIT_SIGTERM) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except OSError as exc:
            if exc.filename is None or exc.errno not in FILE_FAULTS:
                raise typer.Exit(_crashed(exc)) from exc
            console.error(f"{exc.filename}: {exc.strerror}")  # a path an option named: full, read-only, too long
            raise typer.Exit(EXIT_BAD_INPUT) from exc
        except Exception as exc:
            raise typer.Exit(_crashed(exc)) from exc
    return wrapper


def _crashed(exc: Exception) -> int:
    """The crash handler: one line naming the exception and where its traceback went."""
    log = _crash_log()
    console.error(f"unexpected {type(exc).__name__}: {exc} (traceback in {log})")
    return EXIT_FAILED


def _crash_log() -> Path:
    path = Path(tempfile.gettempdir()) / f"rif-crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    return safefs.replace_file(path, traceback.format_exc().encode(), 0o600)  # /tmp is shared: planted names replaced


@contextmanager
def terminates() -> Iterator[None]:
    """SIGTERM raises Terminated while the block runs, so its cleanup and run record happen as for Ctrl-C."""
    previous = signal.signal(signal.SIGTERM, _terminate)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


def show_version(value: bool) -> None:
    if value:
        console.out.print(f"builder (rocm-image-factory) {version('rocm-image-factory')}")
        raise typer.Exit(EXIT_OK)


class _HelpTable(Table):
    """typer's option tables in three columns (names, value, help), the first two never cut, long words of the help
    folded: at 80 columns typer's six columns (long, short, negative long and short names, value, help) leave
    rich too little room, and it cut `--insecure-registry` to `--insecure-regis…` and help words likewise."""

    def add_row(self, *renderables: Any, **options: Any) -> None:
        if len(renderables) >= 6 and all(isinstance(r, str | Text) for r in renderables[-6:-1]):
            *first, long, short, negative, negative_short, value, text = renderables
            names = Text(" ").join(Text(n) if isinstance(n, str) else n for n in (long, short) if str(n))
            negatives = [Text(n) if isinstance(n, str) else n for n in (negative, negative_short) if str(n)]
            if negatives:
                names = Text("/").join([names, Text(" ").join(negatives)])
            renderables = (*first, names, value, text)
        super().add_row(*renderables, **options)
        for column in self.columns[:-1]:
            column.no_wrap = True
        self.columns[-1].overflow = "fold"


def flags_as_flags(command: Any) -> None:
    """Help shows `--push`, not `--push <bool>`: a flag takes no value; and option names are never cut."""
    typer_help.Table = _HelpTable  # type: ignore[attr-defined]  # (the module's own name for rich's Table)
    for param in command.params:
        if getattr(param, "is_flag", False):
            param.metavar = ""
    help_option = command.get_help_option

    def flag_help(ctx: Any) -> Any:
        option = help_option(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = flag_help
    for sub in getattr(command, "commands", {}).values():
        flags_as_flags(sub)
