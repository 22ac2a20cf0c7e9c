"""Real TLS servers on loopback for the TLS and HTTP/2 tests.

nginx, as users run it, with the test session's own certificates (tests/support/certs.py) on four
ports: HTTPS with HTTP/2 offered (ALPN), HTTPS that demands a client certificate (mTLS),
HTTP/2 over cleartext (prior knowledge only, as nginx does it), and HTTPS that speaks
HTTP/1.1 only. Its access log records, per request, the port, the protocol the request
arrived in, the TLS version and the client certificate check, so each test can check what
the server saw, not only what the runner says, and when each connection was open.

nginx answers a request without the client certificate it demands with a 400; servers
that refuse in the TLS handshake itself are StrictTlsServer below.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.certs import Pki

_HTTP = """
    log_format tls '$server_port $server_protocol $ssl_protocol $ssl_client_verify $connection $msec '
                   '$connection_time $status "$ssl_client_s_dn"';
    access_log {dir}/access.log tls;
    ssl_protocols TLSv1.2 TLSv1.3;  # nginx 1.22 leaves TLS 1.3 out by default; clients use it first
    ssl_certificate {server_cert};
    ssl_certificate_key {server_key};
    server {{
        listen 127.0.0.1:{https} ssl http2;
        location / {{ return 200 "ok\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{mtls} ssl;
        ssl_verify_client on;
        ssl_client_certificate {ca};
        location / {{ return 200 "ok\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{h2c} http2;
        location / {{ return 200 "ok\\n"; }}
    }}
    server {{
        listen 127.0.0.1:{http1} ssl;
        location / {{ return 200 "ok\\n"; }}
    }}
"""


@dataclass(frozen=True)
class Logged:
    """One request as nginx logged it."""

    port: int
    protocol: str  # $server_protocol: HTTP/1.1, HTTP/2.0
    tls: str  # $ssl_protocol: TLSv1.3, or "-" over cleartext
    client_verify: str  # $ssl_client_verify: SUCCESS, NONE, FAILED:..., or "-"
    connection: int  # nginx's connection serial number
    logged: float  # $msec: when the request was logged, its response sent (s since the epoch, to the ms)
    connection_age: float  # $connection_time: how long its connection had been open then (s, to the ms)
    status: int
    client_dn: str  # $ssl_client_s_dn: CN=soak-client


@dataclass
class TlsNginx:
    pki: Pki
    https_port: int  # TLS, HTTP/2 and HTTP/1.1 offered in ALPN
    mtls_port: int  # TLS, a client certificate signed by the test CA required
    h2c_port: int  # cleartext HTTP/2, prior knowledge
    http1_port: int  # TLS, HTTP/1.1 only
    access_log: Path

    def url(self, port: int, scheme: str = "https", host: str = "127.0.0.1") -> str:
        return f"{scheme}://{host}:{port}/"

    def logged(self) -> list[Logged]:
        if not self.access_log.exists():
            return []
        entries = []
        for line in self.access_log.read_text().splitlines():
            port, protocol, tls, verify, connection, logged, age, status, dn = line.split(" ", 8)
            entries.append(Logged(int(port), protocol, tls, verify, int(connection), float(logged), float(age),
                                  int(status), dn.strip('"')))
        return entries


@contextmanager
def tls_nginx(pki: Pki, directory: Path, ports: list[int]) -> Iterator[TlsNginx]:
    """nginx serving the four TLS and HTTP/2 ports until the block ends."""
    from tests.conftest import running_nginx

    https, mtls, h2c, http1 = ports
    http = _HTTP.format(dir=directory, https=https, mtls=mtls, h2c=h2c, http1=http1,
                        server_cert=pki.server_cert, server_key=pki.server_key, ca=pki.ca)
    with running_nginx(directory, http, ports):
        yield TlsNginx(pki, https, mtls, h2c, http1, directory / "access.log")


class StrictTlsServer:
    """HTTPS that refuses, in the TLS handshake itself, a client without a certificate from the CA.

    What Go, Envoy and most servers other than nginx do with a required client certificate:
    in TLS 1.3 the client learns of it from an alert after it has sent its request. Each
    accepted connection gets one `200 ok` and is closed. Counts handshakes by outcome.
    """

    def __init__(self, pki: Pki) -> None:
        self._context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(pki.ca))
        self._context.load_cert_chain(str(pki.server_cert), str(pki.server_key))
        self._context.verify_mode = ssl.CERT_REQUIRED
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self.accepted = 0
        self.refused = 0
        self._lock = threading.Lock()
        self._stopping = False

    def __enter__(self) -> StrictTlsServer:
        threading.Thread(target=self._accept, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stopping = True
        self._listener.close()

    def _accept(self) -> None:
        while not self._stopping:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        client.settimeout(5)
        tls = self._context.wrap_socket(client, server_side=True, do_handshake_on_connect=False)
        try:
            tls.do_handshake()
        except (ssl.SSLError, OSError):
            with self._lock:
                self.refused += 1
            _linger_close(tls)
            return
        with self._lock:
            self.accepted += 1
        with tls:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = tls.recv(4096)
                if not chunk:
                    return
                request += chunk
            tls.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n")


def _linger_close(tls: ssl.SSLSocket) -> None:
    """Close once the client has read our TLS alert: closing with its request unread would send
    a reset, which can overtake the alert, and the client would see only the connection go."""
    try:
        tls.shutdown(socket.SHUT_WR)  # drops TLS: what follows is the plain socket
        while tls.recv(4096):
            pass
    except OSError:
        pass
    tls.close()
