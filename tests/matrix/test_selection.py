"""Command-line selection that lives in plan.py: the --registry option."""

from __future__ import annotations

import pytest

from builder.core.errors import InputError
from builder.registry.address import check_registry


@pytest.mark.parametrize("value", ["https://ghcr.io/org", "user:hunter2@ghcr.io/org", "GHCR.io/org", "ghcr.io/Org",
                                   "ghcr.io/ org", "ghcr.io//org", "http:/x", "ghcr.io/org/", ""])
def test_a_bad_registry_option_is_refused_without_echoing_a_password(value: str) -> None:
    with pytest.raises(InputError) as exc:
        check_registry(value)
    assert "--registry" in str(exc.value) and "hunter2" not in str(exc.value)


@pytest.mark.parametrize("value", ["ghcr.io/org", "127.0.0.1:5000/rocm", "localhost:5000", "reg.example:443/a/b-c",
                                   "[::1]:5000/ns"])
def test_good_registry_options_pass(value: str) -> None:
    assert check_registry(value) == value
