#!/usr/bin/env bash
# The main job on the built-in example: make the offline inputs (a debootstrapped Debian 12 base and
# a wheelhouse with CPU torch), then build, validate and push every cell of examples/local.yaml to
# the local registry, then write the catalog of the published images to .rif/site. Images stay in the
# local engine and the registry afterwards.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/setup.sh
# Pull the base where a registry is reachable; otherwise make it from the host's Debian mirror.
docker image inspect debian:12 >/dev/null 2>&1 || docker pull -q debian:12 2>/dev/null || builder base debian-12
builder wheelhouse --matrix examples/local.yaml --dest .rif/wheelhouse --use-pip-config
builder build --matrix examples/local.yaml --wheelhouse .rif/wheelhouse \
  --push --registry "$RIF_TEST_REGISTRY/rocm" --report .rif/records/example.json "$@"
echo "published: $(python3 -c "import urllib.request; print(urllib.request.urlopen('http://$RIF_TEST_REGISTRY/v2/rocm/pytorch/tags/list').read().decode())")"
# The catalog of what the registry now holds: one page per image (HTML and Markdown) and an index.
# The example's own build tree, where the pages find each image's Dockerfile (the committed images/ holds the
# production matrix).
builder render --matrix examples/local.yaml --out .rif/example-images >/dev/null
builder catalog --registry "$RIF_TEST_REGISTRY/rocm" --records .rif/records --out .rif/site --images .rif/example-images
