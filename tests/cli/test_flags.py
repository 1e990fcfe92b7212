"""builder.cli.flags: a group of flags is one parameter of the command and its fields' options on the command line;
the build cache and the compression checked once for every command."""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import pytest
import typer
from typer.testing import CliRunner

from builder.buildkit.export import Cache
from builder.cli import flags
from builder.cli.app import COMMANDS
from builder.core.errors import InputError
from tests.fakes.checkout import DATA


@dataclass(frozen=True)
class Pair:
    left: Annotated[str, typer.Option("--left")] = "l"
    right: Annotated[int, typer.Option("--right", min=0)] = 0


def test_a_group_s_fields_are_options_and_the_command_gets_the_group() -> None:
    seen: list[tuple[Pair, str]] = []

    @flags.grouped
    def command(name: Annotated[str, typer.Argument()], pair: Pair, tail: Annotated[str, typer.Option()] = "t"
                ) -> None:
        seen.append((pair, f"{name}/{tail}"))

    assert list(inspect.signature(command).parameters) == ["name", "pair__left", "pair__right", "tail"]
    app = typer.Typer()
    app.command()(command)
    app.command("other")(lambda: None)
    result = CliRunner().invoke(app, ["command", "n", "--right", "3", "--tail", "x"])
    assert result.exit_code == 0, result.output
    assert seen == [(Pair("l", 3), "n/x")]
    refused = CliRunner().invoke(app, ["command", "n", "--right", "-1"])  # the field's own checks hold
    assert refused.exit_code == 2 and "--right" in refused.output
    assert inspect.unwrap(command).__name__ == "command"


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[n for n, _ in COMMANDS])
def test_no_command_function_has_more_than_15_parameters(name: str, command: object) -> None:
    """A group of flags (flags.Selection) counts as one: what the function's author reads and passes on."""
    assert len(inspect.signature(inspect.unwrap(command)).parameters) <= 15  # type: ignore[arg-type]


def test_a_selection_is_the_matrix_s_jobs_sliced() -> None:
    every = flags.Selection(matrix=DATA / "golden.yaml").jobs()
    first = flags.Selection(matrix=DATA / "golden.yaml", shard="1/2").jobs()
    second = flags.Selection(matrix=DATA / "golden.yaml", shard="2/2").jobs()
    assert sorted(j.tag for j in first + second) == sorted(j.tag for j in every) and first and second
    one = every[0].tag
    assert [j.tag for j in flags.Selection(matrix=DATA / "golden.yaml", cell=[one]).jobs()] == [one]
    assert flags.Selection(wheelhouse=Path("rel")).source().wheelhouse == Path("rel").resolve()


def test_the_cache_is_plain_http_only_where_the_registry_client_would_be() -> None:
    assert flags.cache(None, frozenset()) is None
    assert flags.cache("127.0.0.1:5000/ns", frozenset()) == Cache("127.0.0.1:5000/ns/buildcache", True)
    assert not flags.cache("reg.lan:5000/ns", frozenset()).insecure  # type: ignore[union-attr]
    assert flags.cache("reg.lan:5000/ns", frozenset({"reg.lan:5000"})).insecure  # type: ignore[union-attr]
    assert not flags.cache("reg.lan:5000/ns", frozenset(), write=False).write  # type: ignore[union-attr]


def test_compression_is_gzip_or_zstd() -> None:
    assert flags.compression("zstd") == "zstd"
    with pytest.raises(InputError):
        flags.compression("xz")
