"""The suite's plugins. Each concern is a module under tests/fakes/, loaded here for every test:

- workers: each pytest-xdist worker of the engine tier on an engine and registry of its own (RIF_TEST_ENGINES)
- policy: the docker/registry markers (skip without the engine or registry, error when CI is set; enforced)
- engine: the engine and registry fixtures (docker_client, registry, namespace) and image helpers
- inputs: base_image and the real-torch wheelhouse, made once per run
- warm, reclaim: what a test builds does not outlive it, the common images kept warm
- containers: every container a test starts is removed at teardown
- scripted_registry (`server`) and loopback (every bind and connect on loopback)

Helpers the tests import come from their modules: tests.fakes.checkout (ROOT, DATA, builder_cli),
testkit.matrices (write_matrix, load_cells, ...).
"""

from __future__ import annotations

import os

import pytest

# The tests' engine has no bridge (scripts/setup.sh; docker_client refuses one that has): `builder` runs the suite
# starts build their RUN steps on the host's network, as setup.sh's RIF_BUILD_NETWORK=host says, also from a shell
# that did not source it. The product's default stays BuildKit's own network.
os.environ.setdefault("RIF_BUILD_NETWORK", "host")
# No snapshot service is reachable from the tests: `builder lock` pins OS packages only where a test points it at
# its own loopback archive (tests/fakes/aptarchive.py).
os.environ.setdefault("RIF_APT_SNAPSHOT", "off")

pytest.register_assert_rewrite("testkit.matrices")  # problems_of asserts, as it did inside this file

# A plugin comes after the plugins it imports, so each is imported once, assertion-rewritten.
pytest_plugins = ["pytester", "testkit.scripted_registry", "tests.fakes.loopback", "tests.fakes.workers",
                  "tests.fakes.policy", "tests.fakes.engine", "tests.fakes.inputs", "tests.fakes.warm",
                  "tests.fakes.reclaim", "tests.fakes.containers"]
