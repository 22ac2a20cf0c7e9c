"""S3 servers on loopback for the resultsStore's tests: a real one, and ones that misbehave.

moto's server (PyPI's moto[server], in the test extra) speaks S3's REST API as AWS does,
conditional puts (If-None-Match) included; it runs in this process on a free port and the
runner reaches it as any S3-compatible store, through AWS_ENDPOINT_URL. The misbehaving ones
are plain sockets: a port that accepts and never answers (a store that is slow past any wait),
and one that answers every request 403 AccessDenied (a store that refuses writes).
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:PORT

    def environ(self) -> dict[str, str]:
        """What a pod's environment would say to reach it: the SDKs' variables."""
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": "soak-test", "AWS_SECRET_ACCESS_KEY": "x",
                "AWS_REGION": "us-east-1"}

    def create_bucket(self, name: str) -> None:
        import boto3

        boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1", aws_access_key_id="soak-test",
                     aws_secret_access_key="x").create_bucket(Bucket=name)

    def keys(self, bucket: str, prefix: str = "") -> list[str]:
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, region_name="us-east-1",
                              aws_access_key_id="soak-test", aws_secret_access_key="x")
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        return [item["Key"] for page in pages for item in page.get("Contents", [])]


@contextmanager
def moto_s3() -> Iterator[S3Server]:
    """moto's S3 server on a free loopback port, until the block ends."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request in a failing test's output
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield S3Server(f"http://{host}:{port}")
    finally:
        server.stop()


@contextmanager
def silent_server() -> Iterator[S3Server]:
    """A port that accepts connections, reads what comes, and never answers: a store slower than any wait."""
    with _serving(lambda conn: _read_until_closed(conn)) as port:
        yield S3Server(f"http://127.0.0.1:{port}")


_DENIED = (b"HTTP/1.1 403 Forbidden\r\nContent-Type: application/xml\r\nContent-Length: %d\r\n\r\n%s")
_DENIED_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
                b"<Message>Access Denied</Message></Error>")


@contextmanager
def refusing_server() -> Iterator[S3Server]:
    """A store that answers every request 403 AccessDenied, as S3 does to a role without s3:PutObject."""
    def deny(conn: socket.socket) -> None:
        conn.settimeout(10)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            conn.sendall(_DENIED % (len(_DENIED_BODY), _DENIED_BODY))
        except OSError:
            pass

    with _serving(deny) as port:
        yield S3Server(f"http://127.0.0.1:{port}")


def _read_until_closed(conn: socket.socket) -> None:
    conn.settimeout(120)
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


@contextmanager
def _serving(handle):  # type: ignore[no-untyped-def]
    """A listening loopback socket whose connections each go to `handle` on a thread; yields its port."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()
    connections: list[socket.socket] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            connections.append(conn)
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stop.set()
        listener.close()
        for conn in connections:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        thread.join(5)
