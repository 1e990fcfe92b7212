"""builder.registry.address: what --registry and --insecure-registry may say, and who may get plain HTTP."""

from __future__ import annotations

import pytest

from builder.core.errors import InputError
from builder.registry.address import check_insecure, check_registry, host_port, is_loopback, plain_http_ok
from builder.registry.client import RegistryClient


@pytest.mark.parametrize(("address", "loopback"), [
    ("127.0.0.1:5000", True), ("127.8.9.10", True), ("localhost:5000", True), ("[::1]:5000", True),
    ("localhost.evil.example:5000", False), ("127.0.0.1.nip.io", False), ("ghcr.io", False),
    ("10.0.0.1:5000", False)])
def test_plain_http_only_for_loopback(address: str, loopback: bool) -> None:
    assert is_loopback(address) is loopback
    assert RegistryClient(address).scheme == ("http" if loopback else "https")


@pytest.mark.parametrize("value", ["user:hunter2@reg.lan:5000", "http://reg.lan:5000", "reg.lan:5000/ns",
                                   "REG.lan", "reg lan", "", "reg.lan:", "https://u:hunter2@reg.lan"])
def test_a_bad_insecure_registry_is_refused_without_echoing_a_password(value: str) -> None:
    with pytest.raises(InputError) as exc:
        check_insecure(["reg.lan:5000", value])
    assert "--insecure-registry" in str(exc.value) and "hunter2" not in str(exc.value)
    assert len(exc.value.problems) == 1



def test_good_insecure_registries_pass() -> None:
    values = ["reg.lan:5000", "reg.lan", "10.0.0.7:5000", "[fd00::7]:5000", "localhost:5000"]
    assert check_insecure(values) == frozenset(values) and check_insecure(None) == frozenset()


@pytest.mark.parametrize(("address", "normalised"), [
    ("reg.lan:5000", "reg.lan:5000"), ("reg.lan", "reg.lan"), ("user:pw@reg.lan:5000", "reg.lan:5000"),
    ("[fd00:0::7]:5000", "[fd00::7]:5000"), ("[::1]", "[::1]"), ("reg.lan:port", ""), ("", ""),
])
def test_host_port_normalises_what_insecure_entries_are_compared_with(address: str, normalised: str) -> None:
    assert host_port(address) == normalised


def test_plain_http_only_for_loopback_or_an_exact_insecure_entry() -> None:
    assert plain_http_ok("localhost:5000") and not plain_http_ok("reg.lan:5000")
    assert plain_http_ok("reg.lan:5000", frozenset({"reg.lan:5000"}))
    assert not plain_http_ok("reg.lan:5000", frozenset({"reg.lan"}))
    assert not plain_http_ok("reg.lan:x", frozenset({""}))  # an address naming no host matches no entry


@pytest.mark.parametrize("value", ["ghcr.io/org", "127.0.0.1:5000/rocm", "reg.lan:5000", "ghcr.io/a/b_c/d-e"])
def test_good_registries_pass(value: str) -> None:
    assert check_registry(value) == value


@pytest.mark.parametrize(("value", "said"), [
    ("u:hunter2@ghcr.io/org", "must not hold credentials"), ("https://ghcr.io/org", "has a scheme"),
    ("GHCR.io/org", "is not HOST[:PORT]/NAMESPACE"), ("ghcr.io/org/", "is not HOST"), ("", "is not HOST"),
])
def test_a_bad_registry_is_a_usage_error_naming_the_option_never_the_password(value: str, said: str) -> None:
    with pytest.raises(InputError) as exc:
        check_registry(value, "--cache-registry")
    assert said in str(exc.value) and "--cache-registry" in str(exc.value) and "hunter2" not in str(exc.value)
