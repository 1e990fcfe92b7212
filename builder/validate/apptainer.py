"""Validation under Apptainer (opt-in): the image as ROCm's largest sites run it, not as Docker does.

Clusters `apptainer pull docker://IMAGE` and run the SIF read-only, as the invoking (non-root) user, with the
environment from the image config and no /root. So the image is converted to a SIF here and `torch-smoke --json`
runs in it as uid 1000 with --containall, the SIF read-only; a failing check fails the image like any other.
Apptainer runs in a privileged container of the runner (builder.validate.sifrunner) on the engine's host network
(the engine has no bridge; the host network reaches a loopback registry). The image comes from its registry by
digest when the engine holds it from there (it was pulled: the bytes users get), else straight from the engine
(`docker save`, streamed into the runner as an OCI layout).
"""

from __future__ import annotations

from typing import Any

import docker
from docker.errors import DockerException

from builder.buildkit.engine import started
from builder.registry import credentials
from builder.registry.address import plain_http_ok
from builder.validate import sifrunner
from builder.validate.runner import Check, parse_smoke

SUITE = "apptainer"
USER, UID = "rif", 1000  # any uid but root: Apptainer runs as the invoking user
WORK = "/work"
SIF = f"{WORK}/image.sif"
CONVERT_TIMEOUT_S = 1800
SMOKE_TIMEOUT_S = 900
# A validation SIF is thrown away: no compression (a pulled SIF is compressed; its files are the same).
BUILD = ["apptainer", "build", "--force", "--mksquashfs-args", "-no-compression", SIF]


def registry_source(repo_digests: list[str]) -> str | None:
    """HOST/REPO@sha256:... of a registry the engine holds the image from (pulled), or None (only local names)."""
    for ref in repo_digests:
        name = ref.partition("@")[0]
        first = name.split("/", 1)[0]
        if "/" in name and ("." in first or ":" in first or first == "localhost") and first != "docker.io":
            return ref
    return None


def build_command(source: str | None) -> list[str]:
    """apptainer build of the registry's image (plain HTTP only for a loopback registry), or of the layout."""
    if source is None:
        return [*BUILD, f"oci://{WORK}/layout"]
    host = source.split("/", 1)[0]
    return [*BUILD[:2], *(["--no-https"] if plain_http_ok(host) else []), *BUILD[2:], f"docker://{source}"]


def exec_command(args: list[str]) -> list[str]:
    """torch-smoke the way a cluster user runs it: --containall (no host home, /tmp, env), read-only image."""
    return ["timeout", str(SMOKE_TIMEOUT_S), "apptainer", "--quiet", "exec", "--containall", SIF, *args]


def run_apptainer(client: docker.DockerClient, ref: str) -> list[Check]:
    """Convert ref to a SIF and run `torch-smoke --json` in it as a non-root user; its checks, suite apptainer."""
    try:
        image = client.images.get(ref)
        runner = sifrunner.ensure(client)
    except (DockerException, RuntimeError) as exc:
        return [Check(SUITE, "runner", "fail", f"no Apptainer runner: {exc}")]
    source = registry_source(list(image.attrs.get("RepoDigests") or []))
    try:
        with started(client, runner, ["sleep", "infinity"], entrypoint=[], privileged=True,
                     network_mode="host") as box:
            converted = convert(box, image, source)
            if converted.status == "fail":
                return [converted]
            code, out, err = run_in(box, exec_command(["torch-smoke", "--json"]), user=USER)
    except DockerException as exc:  # the engine refused the runner or a command in it: this image's failure
        return [Check(SUITE, "run", "fail", f"the Apptainer runner failed: {exc}")]
    return [converted, *(Check(SUITE, c.name, c.status, c.detail, c.fix) for c in parse_smoke(out, err, code))]


def convert(box: Any, image: Any, source: str | None) -> Check:
    """The SIF at SIF, read-only for everyone, and the user to run it; the Check says from where, or why not."""
    env = {}
    run_in(box, ["mkdir", "-p", f"{WORK}/layout"])
    if source is None:
        if not box.put_archive(f"{WORK}/layout", image.save(chunk_size=1 << 20)):
            return Check(SUITE, "convert", "fail", "the image's archive could not be copied into the runner")
    elif (found := credentials.from_environment()) is not None:  # passed in the API call, never in argv
        env = {"APPTAINER_DOCKER_USERNAME": found.username, "APPTAINER_DOCKER_PASSWORD": found.password}
    code, out, err = run_in(box, ["timeout", str(CONVERT_TIMEOUT_S), *build_command(source)], environment=env)
    where = f"docker://{source}" if source else "the engine's archive (docker save)"
    if code != 0:
        return Check(SUITE, "convert", "fail", f"apptainer build from {where} exited {code}: "
                     f"{(err or out).strip()[-500:]}")
    run_in(box, ["sh", "-c", f"rm -rf {WORK}/layout && chmod 0444 {SIF} && useradd --create-home --uid {UID} {USER}"])
    return Check(SUITE, "convert", "pass", f"SIF from {where}; torch-smoke runs as uid {UID} with --containall, "
                 "the SIF read-only")


def run_in(box: Any, command: list[str], user: str = "root", environment: dict[str, str] | None = None,
           ) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of a command in the runner."""
    result = box.exec_run(command, user=user, environment=environment or {}, demux=True)
    out, err = result.output if isinstance(result.output, tuple) else (result.output, b"")
    return int(result.exit_code), _text(out), _text(err)


def _text(data: bytes | None) -> str:
    return (data or b"").decode(errors="replace")
