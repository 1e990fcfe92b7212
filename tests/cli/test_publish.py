"""`builder publish` and `builder push` (builder.cli.publish): options that contradict each other are refused first."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from builder.buildkit.export import Cache
from builder.cli import publish
from builder.cli.app import app
from builder.core.errors import InputError
from builder.pipeline import lifecycle
from tests.fakes.checkout import DATA

MATRIX = ["--matrix", str(DATA / "e2e.yaml")]


@pytest.mark.parametrize(("args", "said"), [
    (["--plan", "--no-push"], "--no-push: --plan builds nothing and --no-push builds"),
    (["--dry-run", "--no-push"], "--no-push: --plan builds nothing"),  # --dry-run is --plan
    (["--plan", "--shared-stages"], "--shared-stages: builds stages and --plan builds nothing"),
    (["--compression", "xz"], "--compression: 'xz': gzip or zstd"),
    (["--cache-registry", "https://r.io/ns"], "--cache-registry: 'https://r.io/ns' has a scheme"),
])
def test_contradicting_or_bad_options_exit_2_before_any_work(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["publish", *MATRIX, "--registry", "127.0.0.1:1/ns", *args])
    assert result.exit_code == 2 and said in result.output, result.output


@pytest.mark.parametrize("command", [["publish", *MATRIX], ["push", "img"]])
def test_without_a_registry_it_asks_for_one(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIF_REGISTRY", raising=False)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2 and "--registry: needs REGISTRY/NAMESPACE" in result.output


def test_the_cache_is_plain_http_only_where_the_registry_client_would_be() -> None:
    assert publish._cache(None, frozenset()) is None
    assert publish._cache("127.0.0.1:5000/ns", frozenset()) == Cache("127.0.0.1:5000/ns/buildcache", True)
    assert not publish._cache("reg.lan:5000/ns", frozenset()).insecure  # type: ignore[union-attr]
    assert publish._cache("reg.lan:5000/ns", frozenset({"reg.lan:5000"})).insecure  # type: ignore[union-attr]


def test_compression_is_gzip_or_zstd() -> None:
    assert publish._compression("zstd") == "zstd"
    with pytest.raises(InputError):
        publish._compression("xz")


@pytest.mark.parametrize(("args", "release"), [([], False), (["--release"], True)])
def test_release_reaches_the_run_s_options(args: list[str], release: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def run(todo: object, options: lifecycle.Options, *rest: object) -> int:
        seen.append(options.bake.release)
        return 0

    monkeypatch.setattr("builder.cli.publish.runs.run", run)
    result = CliRunner().invoke(app, ["publish", *MATRIX, "--registry", "127.0.0.1:1/ns", *args])
    assert result.exit_code == 0, result.output
    assert seen == [release]
