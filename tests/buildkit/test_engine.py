"""The installed (unpacked) size of an image, which the containerd image store does not put in inspect's Size."""

from __future__ import annotations

import signal
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import docker
import pytest

from builder.buildkit.engine import MANIFESTS_API, installed_bytes, run_captured, side_by_side, started

ID = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


@dataclass
class _Answer:
    body: Any
    ok: bool = True

    def json(self) -> Any:
        return self.body


@dataclass
class _Api:
    answer: _Answer
    base_url: str = "http+docker://localhost"
    asked: list[tuple[str, dict[str, str]]] = field(default_factory=list)

    def get(self, url: str, params: dict[str, str]) -> _Answer:
        self.asked.append((url, params))
        return self.answer


@dataclass
class _Image:
    id: str
    attrs: dict[str, Any]


@dataclass
class _Images:
    image: _Image

    def get(self, ref: str) -> _Image:
        return self.image


def _client(attrs: dict[str, Any], listed: Any, ok: bool = True) -> Any:
    client = type("Client", (), {})()
    client.images = _Images(_Image(ID, attrs))
    client.api = _Api(_Answer(listed, ok))
    return client


def _entry(image_id: str, unpacked: int, content: int = 344_492_147) -> dict[str, Any]:
    return {"Id": image_id, "Size": content + unpacked, "Manifests": [
        {"Kind": "image", "Available": True, "Size": {"Content": content, "Total": content + unpacked},
         "ImageData": {"Platform": {"os": "linux"}, "Size": {"Unpacked": unpacked}}},
        {"Kind": "attestation", "Available": True, "Size": {"Content": 900, "Total": 900}}]}


CONTAINERD = {"Size": 344_492_147, "Descriptor": {"digest": ID}}


def test_the_containerd_store_answers_with_the_unpacked_size_not_inspects_compressed_one() -> None:
    client = _client(CONTAINERD, [_entry(OTHER, 5), _entry(ID, 1_209_335_808)])
    assert installed_bytes(client, ID) == 1_209_335_808
    [(url, params)] = client.api.asked
    assert url.endswith(f"/v{MANIFESTS_API}/images/json") and params == {"manifests": "1"}


def test_a_graph_driver_engines_size_is_already_the_unpacked_one() -> None:
    client = _client({"Size": 1_553_827_955}, [])
    assert installed_bytes(client, ID) == 1_553_827_955
    assert client.api.asked == []


@pytest.mark.parametrize("listed", [
    [{"Id": ID, "Size": 1}],  # an engine older than API 1.47: no per-manifest sizes
    [_entry(OTHER, 5)],  # the image went meanwhile
    {"message": "client version 1.47 is too new"},
    [{"Id": ID, "Manifests": [{"Kind": "image", "Available": False, "ImageData": {"Size": {"Unpacked": 9}}}]}],
])
def test_without_an_unpacked_size_there_is_no_number_rather_than_a_false_one(listed: Any) -> None:
    assert installed_bytes(_client(CONTAINERD, listed), ID) is None


def test_a_refused_list_request_is_no_number() -> None:
    assert installed_bytes(_client(CONTAINERD, {"message": "bad version"}, ok=False), ID) is None


@pytest.mark.docker
def test_a_real_images_installed_size_is_above_its_compressed_size(docker_client: docker.DockerClient,
                                                                  base_image: str) -> None:
    """What the record, the build table and the catalog call installed: larger than what a pull downloads,
    and about what its files take in a container."""
    image = docker_client.images.get(base_image)
    installed = installed_bytes(docker_client, base_image)
    assert installed is not None
    if "Descriptor" in image.attrs:  # containerd store: inspect's Size is the compressed content
        assert installed > int(image.attrs["Size"])
    code, out, _ = run_captured(docker_client, base_image, ["du", "-sxb", "/"], entrypoint=[])
    files = int(out.split()[0]) if code == 0 else 0
    assert files and 0.5 * installed < files < 1.5 * installed, (files, installed)


# -- two containers side by side (validation: the testinfra suite beside the smoke test) ---------------------------

def test_side_by_side_returns_both_results_in_order_and_raises_the_failing_calls_error() -> None:
    """The calls need no engine here (they start no container); the client is only asked to remove what they
    started, which is nothing."""
    client: Any = type("Client", (), {})()
    assert side_by_side(client, lambda: "testinfra", lambda: ["smoke"]) == ("testinfra", ["smoke"])
    both_ran = threading.Barrier(2, timeout=30)  # each call waits for the other: they run at the same time

    def meet(result: str) -> str:
        both_ran.wait()
        return result

    assert side_by_side(client, lambda: meet("a"), lambda: meet("b")) == ("a", "b")

    def fails() -> str:
        raise RuntimeError("the engine went away")

    with pytest.raises(RuntimeError, match="went away"):
        side_by_side(client, fails, lambda: "b")


@pytest.mark.docker
def test_an_interrupt_removes_the_containers_of_both_calls_and_goes_on(docker_client: docker.DockerClient,
                                                                     base_image: str) -> None:
    """Ctrl-C reaches the main thread only: the two containers the calls are waiting on go, so both calls return
    and the interrupt goes on, with nothing of theirs left on the engine (tests/faults/test_signals.py: the same
    through `builder build` with SIGINT and SIGTERM)."""
    mark = f"rif-side-{uuid.uuid4().hex[:8]}"
    running = threading.Barrier(3, timeout=120)

    def sleeper() -> int:
        with started(docker_client, base_image, ["sleep", "600"], entrypoint=[], labels={mark: "1"}) as container:
            running.wait()  # both containers run before the interrupt
            return int(container.wait(timeout=600)["StatusCode"])

    def interrupt() -> None:  # a real SIGINT (as from a terminal): it wakes the main thread's wait
        running.wait()
        signal.pthread_kill(main, signal.SIGINT)

    main = threading.main_thread().ident
    assert main is not None
    # As from a terminal: a suite started in the background (`&`, nohup) inherits an ignored SIGINT.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt, daemon=True).start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            side_by_side(docker_client, sleeper, sleeper)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert time.monotonic() - start < 300  # the sleeps (600 s) did not run out: they were stopped
    assert docker_client.containers.list(all=True, filters={"label": mark}) == []
