"""What the tests' nginx logged: the server's own counts, to check the runner's against.

Its access log has one line per request, in the `soak` format of tests/conftest.py:
`$connection $connection_requests $request_method $uri $status "$host" "$http_authorization"
"$http_accept_encoding" "$http_connection" $request_length $body_bytes_sent`.
"""

from __future__ import annotations

from collections import Counter


def paths(lines: list[str]) -> Counter[str]:
    """How many requests nginx logged for each path ($uri, the 4th field)."""
    return Counter(line.split()[3] for line in lines)


def connections(lines: list[str]) -> list[list[bool]]:
    """The requests of each connection nginx logged, in order: whether each said Connection: close."""
    by_connection: dict[str, list[tuple[int, bool]]] = {}
    for line in lines:
        fields = line.split()
        by_connection.setdefault(fields[0], []).append((int(fields[1]), fields[8] == '"close"'))
    for requests in by_connection.values():
        assert [n for n, _ in requests] == list(range(1, len(requests) + 1)), "nginx logged a connection's requests in order"
    return [[closing for _, closing in requests] for requests in by_connection.values()]
