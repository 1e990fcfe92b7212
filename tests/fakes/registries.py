"""Real registries started by the tests themselves, and a token server for them.

All of it listens on 127.0.0.1 only, on free ports:
- Registry: the distribution registry (`docker-registry serve`) on its own port and storage, anonymous, with
  htpasswd (Basic) or with token auth (Bearer) against a TokenServer;
- TokenServer: the token side of the distribution token spec, in a thread: checks Basic credentials, and
  issues RS256 JWTs granting exactly the scopes asked for, signed by a key whose self-signed certificate is
  the registry's rootcertbundle (the token carries it in its `x5c` header);
- the proxy that records (and may fault) requests is tests.fakes.faultproxy.FaultProxy; with no rules it only records
  (method and path, bodies skipped) and forwards every byte unchanged, so a test can count writes.
"""

from __future__ import annotations

import base64
import datetime
import json
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import bcrypt
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from testkit.serving import POLL_S
from tests.fakes.loopback import check_address
from tests.fakes.policy import unavailable

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


# -- the token server ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Grant:
    """One token issued: to whom, and for exactly which scopes."""

    account: str
    scopes: tuple[str, ...]


class TokenServer:
    """Issues registry tokens on http://127.0.0.1:PORT/token to one user with one password."""

    SERVICE = "rif-test"
    ISSUER = "rif-test-issuer"
    LIFETIME_S = 60

    def __init__(self, root: Path, user: str, password: str) -> None:
        self.user, self.password = user, password
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.cert = _self_signed(self.key)
        self.bundle = root / f"token-{uuid.uuid4().hex[:6]}.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.x5c = base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()
        self.grants: list[Grant] = []
        self.refused = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((LOOPBACK, 0), self._handler())
        self._httpd.daemon_threads = True
        self.realm = f"http://{LOOPBACK}:{self._httpd.server_address[1]}/token"
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": POLL_S}, daemon=True)

    def start(self) -> TokenServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def registry_auth(self) -> str:
        """The `auth:` section of a registry config that trusts this server's tokens."""
        return (f"auth:\n  token:\n    realm: {self.realm}\n    service: {self.SERVICE}\n"
                f"    issuer: {self.ISSUER}\n    rootcertbundle: {self.bundle}\n")

    def issue(self, account: str, scopes: list[str]) -> dict[str, object]:
        now = int(time.time())
        access = [_access(scope) for scope in scopes]
        claims = {"iss": self.ISSUER, "sub": account, "aud": self.SERVICE, "exp": now + self.LIFETIME_S,
                  "nbf": now - 1, "iat": now, "jti": uuid.uuid4().hex, "access": access}
        token = jwt.encode(claims, self.key, algorithm="RS256", headers={"x5c": [self.x5c]})
        with self._lock:
            self.grants.append(Grant(account, tuple(scopes)))
        return {"token": token, "access_token": token, "expires_in": self.LIFETIME_S,
                "issued_at": datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}

    def _authorized(self, header: str | None) -> str | None:
        """The account when header is Basic with the right user and password; None otherwise."""
        scheme, _, value = (header or "").partition(" ")
        if scheme.lower() != "basic":
            return None
        try:
            user, _, password = base64.b64decode(value, validate=True).decode().partition(":")
        except ValueError:
            return None
        return user if (user, password) == (self.user, self.password) else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                url = urllib.parse.urlsplit(self.path)
                if url.path != "/token":
                    return self._reply(404, {"errors": [{"code": "NOT_FOUND"}]})
                account = server._authorized(self.headers.get("Authorization"))
                if account is None:
                    with server._lock:
                        server.refused += 1
                    return self._reply(401, {"errors": [{"code": "UNAUTHORIZED", "message": "bad credentials"}]},
                                       {"WWW-Authenticate": 'Basic realm="rif-test-token"'})
                query = urllib.parse.parse_qs(url.query)
                scopes = [s for value in query.get("scope", []) for s in value.split(" ") if s]
                if query.get("service", [TokenServer.SERVICE]) != [TokenServer.SERVICE]:
                    return self._reply(400, {"errors": [{"code": "UNSUPPORTED", "message": "unknown service"}]})
                return self._reply(200, server.issue(account, scopes))

            def do_POST(self) -> None:  # no OAuth2 password grant: clients fall back to GET with Basic
                self._reply(404, {"errors": [{"code": "UNSUPPORTED"}]})

            def _reply(self, status: int, body: dict[str, object], headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                for key, value in {"Content-Type": "application/json", **(headers or {})}.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler


def _access(scope: str) -> dict[str, object]:
    """`repository:ns/pytorch:pull,push` -> the claim granting exactly that (names may hold ':')."""
    kind, _, rest = scope.partition(":")
    name, _, actions = rest.rpartition(":")
    return {"type": kind, "name": name, "actions": [a for a in actions.split(",") if a]}


def _self_signed(key: rsa.RSAPrivateKey) -> x509.Certificate:
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "rif-test-token-signer")])
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(hours=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))


# -- the registry --------------------------------------------------------------------------------------------

def need_docker_registry() -> None:
    """`docker-registry` (distribution) on PATH: skip without it, fail when CI is set."""
    if subprocess.run(["sh", "-c", "command -v docker-registry"], capture_output=True, check=False).returncode:
        unavailable("docker-registry is not installed")


def write_htpasswd(path: Path, user: str, password: str) -> Path:
    """An htpasswd file for the registry: bcrypt, as distribution requires."""
    path.write_text(f"{user}:{bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=5)).decode()}\n")
    return path


class Registry:
    """A real distribution registry on its own port and storage, which a test may stop and start."""

    def __init__(self, root: Path, htpasswd: Path | None = None, token: TokenServer | None = None) -> None:
        self.port = free_port()
        self.address = f"{LOOPBACK}:{self.port}"
        if htpasswd is not None:
            auth = f"auth:\n  htpasswd:\n    realm: rif-test\n    path: {htpasswd}\n"
        else:
            auth = token.registry_auth() if token is not None else ""
        self.config = root / f"registry-{self.port}.yml"
        self.log = root / f"registry-{self.port}.log"
        self.storage = root / f"storage-{self.port}"
        self.config.write_text(f"version: 0.1\nlog: {{level: warn}}\nstorage:\n  filesystem: {{rootdirectory: "
                               f"{self.storage}}}\nhttp:\n  addr: {self.address}\n{auth}")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> Registry:
        listen = re.search(r"^\s*addr:\s*(\S+)", self.config.read_text(), re.MULTILINE)  # none: every interface
        check_address(listen.group(1) if listen else ":5000", f"the registry of {self.config.name}")
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(["docker-registry", "serve", str(self.config)], stdout=log,
                                         stderr=subprocess.STDOUT)
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        for _ in range(100):
            try:
                opener.open(f"http://{self.address}/v2/", timeout=1).close()
                return self
            except urllib.error.HTTPError:
                return self  # 401 from an auth registry: it is up
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        raise RuntimeError(f"registry did not start: {self.log.read_text(errors='replace')[-2000:]}")

    def stop(self) -> None:
        """Kill it; its storage stays, so start() brings back what was pushed."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def close(self) -> None:
        """Stop it for good and drop its storage (real torch images: hundreds of MB per registry)."""
        self.stop()
        shutil.rmtree(self.storage, ignore_errors=True)
