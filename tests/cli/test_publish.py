"""`builder publish` and `builder push` (builder.cli.publish): one job each, bad options refused before any work."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from builder.cli.app import app
from builder.pipeline import lifecycle
from tests.fakes.checkout import DATA

MATRIX = ["--matrix", str(DATA / "e2e.yaml")]


@pytest.mark.parametrize(("args", "said"), [
    (["--compression", "xz"], "--compression: 'xz': gzip or zstd"),
    (["--cache-registry", "https://r.io/ns"], "--cache-registry: 'https://r.io/ns' has a scheme"),
])
def test_bad_options_exit_2_before_any_work(args: list[str], said: str) -> None:
    result = CliRunner().invoke(app, ["publish", *MATRIX, "--registry", "127.0.0.1:1/ns", *args])
    assert result.exit_code == 2 and said in result.output, result.output


@pytest.mark.parametrize("option", [["--format", "json"], ["--move-tags"], ["--runner-disk", "60G"],
                                    ["--runner", "big"]])
def test_an_option_of_plan_or_stages_is_unknown_to_publish(option: list[str]) -> None:
    """Only the plan formats, moves tags registry-side or sizes rows: publish has no such option, so click refuses
    it (exit 2) and `publish --help` does not list it."""
    result = CliRunner().invoke(app, ["publish", *MATRIX, "--registry", "127.0.0.1:1/ns", *option])
    assert result.exit_code == 2 and "No such option" in result.output and option[0] in result.output, result.output


@pytest.mark.parametrize("command", [["publish", *MATRIX], ["push", "img"], ["plan", *MATRIX]])
def test_without_a_registry_it_asks_for_one(command: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RIF_REGISTRY", raising=False)
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 2 and "--registry: needs REGISTRY/NAMESPACE" in result.output


@pytest.mark.parametrize("image", ["UPPER/Case", "img:", "a" * 300, "_lead", "host:5000/", "img@sha256:abc", "a b"])
def test_push_refuses_an_image_that_is_no_reference_before_any_engine_call(image: str,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    def connect() -> object:
        raise AssertionError("the engine was called")

    monkeypatch.setattr("builder.cli.publish.connect", connect)
    result = CliRunner().invoke(app, ["push", "ok-image:1", image, "--registry", "127.0.0.1:1/ns"])
    assert result.exit_code == 2, result.output
    assert "IMAGE: " in result.output and "Traceback" not in result.output, result.output


def test_push_reaches_the_engine_once_every_image_is_a_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[bool] = []

    def connect() -> object:
        called.append(True)
        raise SystemExit(5)

    monkeypatch.setattr("builder.cli.publish.connect", connect)
    result = CliRunner().invoke(app, ["push", "ok-image:1", "127.0.0.1:5000/ns/other@sha256:" + "a" * 64,
                                      "--registry", "127.0.0.1:1/ns"])
    assert called == [True] and result.exit_code == 5, result.output


@pytest.mark.parametrize(("args", "by_family", "no_push"), [([], False, False), (["--by-family"], True, False),
                                                            (["--no-push"], False, True)])
def test_by_family_and_no_push_reach_the_run_s_options(args: list[str], by_family: bool, no_push: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[lifecycle.Options] = []

    def run(todo: object, options: lifecycle.Options, *rest: object) -> int:
        seen.append(options)
        return 0

    monkeypatch.setattr("builder.cli.publish.runs.run", run)
    result = CliRunner().invoke(app, ["publish", *MATRIX, "--registry", "127.0.0.1:1/ns", *args])
    assert result.exit_code == 0, result.output
    (options,) = seen
    assert options.bake is not None and options.bake.by_family is by_family and options.bake.row_of == {}
    assert options.push is not None and options.push.no_push is no_push and options.push.skip_published
