"""builder.registry.reference: Docker's reference grammar (distribution/reference regexp.go and the cases of its
reference_test.go), so a value is checked before any engine call."""

from __future__ import annotations

import pytest

from builder.core.errors import InputError
from builder.registry import reference

DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(("value", "name", "registry", "tag", "digest"), [
    ("test_com", "test_com", "docker.io", None, None),
    ("test.com:tag", "test.com", "docker.io", "tag", None),
    ("test.com:5000", "test.com", "docker.io", "5000", None),  # a tag, not a port: no path follows
    ("test.com/repo:tag", "test.com/repo", "test.com", "tag", None),
    ("test:5000/repo", "test:5000/repo", "test:5000", None, None),
    ("127.0.0.1:5000/ns/x:t", "127.0.0.1:5000/ns/x", "127.0.0.1:5000", "t", None),
    ("localhost/x", "localhost/x", "localhost", None, None),
    ("org/image", "org/image", "docker.io", None, None),  # a first component without . or : is a path
    ("[::1]:5000/x", "[::1]:5000/x", "[::1]:5000", None, None),
    (f"test:5000/repo@{DIGEST}", "test:5000/repo", "test:5000", None, DIGEST),
    (f"test:5000/repo:tag@{DIGEST}", "test:5000/repo", "test:5000", "tag", DIGEST),
    ("a" * 255, "a" * 255, "docker.io", None, None),
    ("rocm-image-factory/pytorch:cpu_debian12_py3.11_torch2.13.0_runtime", "rocm-image-factory/pytorch",
     "docker.io", "cpu_debian12_py3.11_torch2.13.0_runtime", None),
])
def test_a_reference_is_parsed_as_docker_parses_it(value: str, name: str, registry: str, tag: str | None,
                                                    digest: str | None) -> None:
    ref = reference.parse(value)
    assert (ref.name, ref.registry, ref.tag, ref.digest, str(ref)) == (name, registry, tag, digest, value)
    assert ref.pull_args() == (name, digest or tag or "latest")  # by digest when it names one


@pytest.mark.parametrize("value", [
    "", ":justtag", f"@{DIGEST}", "repo@sha256:ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff/x",
    "Uppercase:tag", "UPPER/case", "Org/image:t",
    "test:5000/Uppercase/lowercase:tag", "aa/asdf$$^/aa", "a" * 256, "../../containers/abc",
    "/images/x", "x/../y", "x//y", "x/", "-x", "x:tag with space", "x:" + "t" * 129, "x@sha256:abc",
    "x\n", "x\x1b[2J", "café", "x:t\u202e", "http://host/x", "[fe80::1%eth0]:5000/x",
])
def test_a_value_that_is_no_reference_is_a_usage_error_naming_image(value: str) -> None:
    with pytest.raises(InputError) as caught:
        reference.parse(value)
    [problem] = caught.value.problems
    assert problem.key == "IMAGE" and "\n" not in problem.message and "\x1b" not in problem.message


def test_a_refused_value_is_echoed_cut() -> None:
    with pytest.raises(InputError) as caught:
        reference.parse("../" * 500_000)
    assert len(str(caught.value)) < 500


@pytest.mark.parametrize(("value", "pullable"), [("a" * 64, False), ("sha256:" + "a" * 64, False),
                                                 ("abcdef123456", True), ("x", True)])
def test_a_full_image_id_is_the_engine_s_own_name_never_pulled(value: str, pullable: bool) -> None:
    assert reference.parse(value).pullable is pullable
