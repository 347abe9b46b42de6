"""A real TLS gateway (nginx) that behaves like an Azure ML managed online endpoint.

``NginxGateway`` runs Debian's nginx as a non-daemon child on a free 127.0.0.1 port, with its
own prefix and config in a temporary directory and a test CA + server certificate generated here
(``cryptography``). Like Azure ML it:

- requires ``Authorization: Bearer <key>`` (401 with a JSON error otherwise),
- routes on the ``azureml-model-deployment`` header (no header: the default deployment;
  an unknown name: 404 like Azure ML),
- optionally (``buffering=False``) passes streamed answers on as they come (``proxy_buffering
  off``, what server-sent events need; nginx's default buffers them to the end),
- and, for failure-mode tests, answers two reserved deployment names itself:
  ``throttled`` -> 429 with ``Retry-After``, ``unavailable`` -> 503.

With ``grpc_deployments`` it also serves gRPC (HTTP/2, ``grpc_pass``) on ``grpc_port`` with the same
checks, refusing in gRPC terms (a ``grpc-status`` gRPC clients read reliably) or, with
``plain_grpc_refusals=True``, with the bare HTTP status (see ``_GRPC_SERVER``).

Every request is written to ``access.log`` (``deployment status``), so tests can count attempts.
Usable by any test: ``with NginxGateway(tmp, {"blue": server.http_address}, key=KEY) as gw: ...``.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

THROTTLED = "throttled"
UNAVAILABLE = "unavailable"


def find_nginx() -> str | None:
    return shutil.which("nginx") or next(
        (p for p in ("/usr/sbin/nginx", "/usr/local/sbin/nginx") if os.access(p, os.X_OK)), None
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class TlsFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path


def make_test_ca(directory: Path, *, hostname: str = "localhost") -> TlsFiles:
    """A throw-away CA and a server certificate for ``hostname`` and 127.0.0.1, signed by it."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "tritonkit test CA")])
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hostname)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(hostname), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    files = TlsFiles(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    files.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.server_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.server_key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    files.server_key.chmod(0o600)
    return files


_CONFIG = """
daemon off;
master_process on;
{user}
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 128; }}
http {{
    client_body_temp_path {prefix}/tmp/body;
    proxy_temp_path {prefix}/tmp/proxy;
    fastcgi_temp_path {prefix}/tmp/fastcgi;
    uwsgi_temp_path {prefix}/tmp/uwsgi;
    scgi_temp_path {prefix}/tmp/scgi;
    client_max_body_size 64m;
    default_type application/json;
    log_format tk '$deployment $status';
    access_log {prefix}/access.log tk;

    map $http_authorization $auth_ok {{
        "Bearer {key}" 1;
        default 0;
    }}
    map $http_azureml_model_deployment $deployment {{
        "" "{default}";
        default $http_azureml_model_deployment;
    }}
    map $deployment $upstream {{
{routes}        default "";
    }}
{upstreams}
    server {{
        listen 127.0.0.1:{port} ssl;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {certkey};
        ssl_protocols TLSv1.2 TLSv1.3;

        location / {{
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_read_timeout 60s;
{buffering}            if ($auth_ok = 0) {{
                return 401 '{{"error":"Authorization header missing or key invalid (gateway)"}}';
            }}
            if ($deployment = "{throttled}") {{
                add_header Retry-After {retry_after} always;
                return 429 '{{"error":"Too many requests (gateway throttling)"}}';
            }}
            if ($deployment = "{unavailable}") {{
                return 503 '{{"error":"Service temporarily unavailable (gateway)"}}';
            }}
            if ($upstream = "") {{
                return 404 '{{"error":"No valid deployments to route to: $deployment"}}';
            }}
            proxy_pass http://$upstream;
        }}
    }}
{grpc_server}}}
"""

# gRPC over TLS (HTTP/2): the same key check and routing. Refusals are answered in gRPC terms:
# a trailers-only answer (headers and end of stream in one frame) carrying grpc-status and
# grpc-message, which nginx sends for a 204. A plain HTTP refusal (``return 401``: headers, then an
# error page, then a reset of a stream whose request side is still open) reaches grpc as the HTTP
# status only if grpc looks at the headers before it handles the end of the stream; on a busy
# machine it often does not and reports "Stream removed" (UNKNOWN or INTERNAL) instead
# (docs/known-issues.md). ``plain_grpc_refusals=True`` keeps the plain answers (grpc maps 401 ->
# UNAUTHENTICATED, 404 -> UNIMPLEMENTED, 429/503 -> UNAVAILABLE). Either way the access log records
# the HTTP status of the refusal (401, 404, 429, 503), not the 204 that carries it.
_GRPC_REFUSALS = {
    "auth": (401, 16, "Authorization header missing or key invalid (gateway)"),
    "throttled": (429, 8, "Too many requests (gateway throttling)"),
    "unavailable": (503, 14, "Service temporarily unavailable (gateway)"),
    "unknown": (404, 12, "No valid deployments to route to: $deployment"),
}

_GRPC_SERVER = """
    map $deployment $grpc_upstream {{
{routes}        default "";
    }}
    map $refused $grpc_log_status {{
        "" $status;
        default $refused;
    }}
    log_format tk_grpc '$deployment $grpc_log_status';
{upstreams}
    server {{
        listen 127.0.0.1:{port} ssl http2;
        server_name localhost;
        ssl_certificate {cert};
        ssl_certificate_key {certkey};
        ssl_protocols TLSv1.2 TLSv1.3;
        access_log {prefix}/access.log tk_grpc;
        set $refused "";

        location / {{
            grpc_read_timeout 60s;
            if ($auth_ok = 0) {{
{auth}            }}
            if ($deployment = "{throttled}") {{
{throttled_refusal}            }}
            if ($deployment = "{unavailable}") {{
{unavailable_refusal}            }}
            if ($grpc_upstream = "") {{
{unknown}            }}
            grpc_pass grpc://$grpc_upstream;
        }}
    }}
"""


def _grpc_refusal(kind: str, *, plain: bool) -> str:
    status, grpc_status, message = _GRPC_REFUSALS[kind]
    if plain:
        return f"                return {status};\n"
    return (
        f"                set $refused {status};\n"
        f"                add_header grpc-status {grpc_status} always;\n"
        f'                add_header grpc-message "{message}" always;\n'
        "                return 204;\n"
    )


class NginxGateway:
    """nginx as an Azure-ML-like TLS gateway in front of one or more Triton HTTP endpoints."""

    def __init__(
        self,
        workdir: Path,
        deployments: Mapping[str, str],
        *,
        key: str,
        default: str | None = None,
        retry_after: int = 1,
        grpc_deployments: Mapping[str, str] | None = None,
        buffering: bool = True,
        plain_grpc_refusals: bool = False,
    ) -> None:
        if not deployments:
            raise ValueError("at least one deployment (name -> host:port) is needed")
        self.workdir = Path(workdir)
        self.deployments = dict(deployments)
        self.key = key
        self.default = default or next(iter(self.deployments))
        self.retry_after = retry_after
        self.grpc_deployments = dict(grpc_deployments or {})
        # nginx buffers proxied answers by default: server-sent events (generate_stream) then
        # arrive all at once at the end. buffering=False is what a streaming gateway needs.
        self.buffering = buffering
        self.plain_grpc_refusals = plain_grpc_refusals
        self.port = 0
        self.grpc_port = 0
        self.tls: TlsFiles | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def grpc_url(self) -> str:
        """``grpcs://localhost:P`` (only when ``grpc_deployments`` were given)."""
        return f"grpcs://localhost:{self.grpc_port}"

    @property
    def ca_cert(self) -> Path:
        if self.tls is None:
            raise RuntimeError("gateway not started")
        return self.tls.ca_cert

    def _config(self) -> str:
        upstreams = "".join(
            f"    upstream dep_{i} {{ server {address}; keepalive 4; }}\n"
            for i, address in enumerate(self.deployments.values())
        )
        routes = "".join(f'        "{name}" dep_{i};\n' for i, name in enumerate(self.deployments))
        assert self.tls is not None
        grpc_server = ""
        if self.grpc_deployments:
            grpc_server = _GRPC_SERVER.format(
                routes="".join(
                    f'        "{name}" gdep_{i};\n' for i, name in enumerate(self.grpc_deployments)
                ),
                upstreams="".join(
                    f"    upstream gdep_{i} {{ server {address}; keepalive 4; }}\n"
                    for i, address in enumerate(self.grpc_deployments.values())
                ),
                port=self.grpc_port,
                prefix=self.workdir,
                cert=self.tls.server_cert,
                certkey=self.tls.server_key,
                throttled=THROTTLED,
                unavailable=UNAVAILABLE,
                **{
                    key: _grpc_refusal(kind, plain=self.plain_grpc_refusals)
                    for key, kind in (
                        ("auth", "auth"),
                        ("throttled_refusal", "throttled"),
                        ("unavailable_refusal", "unavailable"),
                        ("unknown", "unknown"),
                    )
                },
            )
        return _CONFIG.format(
            buffering="" if self.buffering else "            proxy_buffering off;\n",
            grpc_server=grpc_server,
            prefix=self.workdir,
            # As root, workers would drop to 'nobody' and lose access to the private tmp dir.
            user="user root;" if os.geteuid() == 0 else "",
            key=self.key,
            default=self.default,
            upstreams=upstreams,
            routes=routes,
            port=self.port,
            cert=self.tls.server_cert,
            certkey=self.tls.server_key,
            throttled=THROTTLED,
            unavailable=UNAVAILABLE,
            retry_after=self.retry_after,
        )

    def start(self) -> NginxGateway:
        nginx = find_nginx()
        if nginx is None:
            raise RuntimeError("nginx is not installed (make test installs it: scripts/system-deps.sh)")
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "tmp").mkdir(exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        self.tls = make_test_ca(self.workdir / "tls")
        self.port = free_port()
        self.grpc_port = free_port() if self.grpc_deployments else 0
        conf = self.workdir / "nginx.conf"
        conf.write_text(self._config())
        self._process = subprocess.Popen(
            [nginx, "-p", str(self.workdir), "-c", str(conf), "-e", str(self.workdir / "error.log")],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._wait_listening()
        return self

    def _wait_listening(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        context = ssl.create_default_context(cafile=str(self.ca_cert))
        while time.monotonic() < deadline:
            if self._process is not None and self._process.poll() is not None:
                raise RuntimeError(f"nginx exited at start-up:\n{self.error_log()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1) as sock:
                    with context.wrap_socket(sock, server_hostname="localhost"):
                        return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nginx did not listen on port {self.port}:\n{self.error_log()}")

    def error_log(self) -> str:
        path = self.workdir / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def access_log(self) -> list[tuple[str, int]]:
        """(deployment, status) of every request so far."""
        path = self.workdir / "access.log"
        if not path.exists():
            return []
        out = []
        for line in path.read_text().splitlines():
            name, _, status = line.rpartition(" ")
            out.append((name, int(status)))
        return out

    def wait_for_log(
        self, start: int, count: int, *, deployment: str | None = None, timeout: float = 60.0
    ) -> list[tuple[str, int]]:
        """Access-log entries after the first ``start`` (only ``deployment``'s when given), once
        there are at least ``count`` of them; what is there after ``timeout`` s otherwise.

        nginx writes a request's line when it closes the request, which for a refused gRPC stream
        can come after the client has its answer (later still on a busy machine): wait for the
        lines, not for a time. The timeout only bounds a test that is failing anyway.
        """
        deadline = time.monotonic() + timeout
        while True:
            entries = [e for e in self.access_log()[start:] if deployment is None or e[0] == deployment]
            if len(entries) >= count or time.monotonic() > deadline:
                return entries
            time.sleep(0.02)

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        try:
            os.killpg(process.pid, signal.SIGQUIT)  # graceful shutdown of master and worker
            process.wait(timeout=10)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)

    def kill(self) -> None:
        """Kill nginx at once (SIGKILL): every open connection drops, as when a gateway dies."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            process.wait(timeout=10)

    def __enter__(self) -> NginxGateway:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
