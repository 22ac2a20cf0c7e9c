"""The engine's view of an HTTP client: open a session, send one request, get one Result.

A session is one client's connection(s): the engine opens one per client, so keep-alive
reuse means one connection per client, as in slow_cooker. Implementations measure the
timings the Result asks for themselves, because only they see the socket. httpx is the one
implementation (runner.load.httpx_transport); the native engine has its own client in C.

Below that, what the Python client and the native engine share so they behave alike: the bound on a response head,
how long a connection is kept (Lifetime), and how a host name is looked up before each new
connection (Resolver: a short cache, and several addresses taken in turn).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import ipaddress
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from runner.core.lazymethods import dataclass
from runner.load.request import Request
from runner.load.result import Result

# The most bytes a response head may take, and a chunk-size line or trailer section: what
# httpcore 1.0.9 allows h11 to buffer (max_incomplete_event_size). The native engine holds
# heads to the same bound, so a server that streams headers forever fails the same way,
# with the same text, in both, and never costs more memory than this per connection.
MAX_HEAD_BYTES = 100 * 1024


@dataclass(frozen=True)
class Lifetime:
    """How long a connection is kept: at most `max_requests` requests, and no request sent on
    it once it is `max_age_ns` old (0: no limit, for either).

    Behind a Kubernetes Service, kube-proxy picks a pod once per connection, so a client that
    keeps its connection for the whole run reaches one pod; a connection that ends now and
    then is a new pick each time. One rule for every engine, decided at the send: a request
    is a connection's last when it is the max_requests-th on it, or when the connection is
    max_age_ns old by the time it is sent. The last request says `Connection: close`, as
    every request does with noReuse (which is max_requests 1): the server knows, closes
    after its response, and nothing more is ever written to that connection; the client
    closes it after the response too, without waiting for the server to. The next send
    dials anew. An idle connection is never closed for its age: it is retired by the next
    request that finds it too old, which rides it one last time.
    """

    max_requests: int = 0
    max_age_ns: int = 0

    @property
    def limited(self) -> bool:
        return bool(self.max_requests or self.max_age_ns)

    def last(self, served: int, opened_ns: int, now_ns: int) -> bool:
        """Whether a request sent at `now_ns` on a connection that has carried `served` requests
        since it was opened (ready to carry one) at `opened_ns` is the connection's last."""
        if self.max_requests and served + 1 >= self.max_requests:
            return True
        return bool(self.max_age_ns) and now_ns - opened_ns >= self.max_age_ns


@dataclass(frozen=True)
class TransportOptions:
    """How requests are sent, whatever the client library."""

    timeout_ns: int  # whole-request limit, from sending to the end of the body
    no_reuse: bool  # a new connection for every request
    compress: bool  # ask for gzip and read the decompressed body
    max_connections: int  # per session; more than 1 only when requests overlap (open model)
    ca_bundle: str = ""  # PEM file of the CAs that servers are verified against; "" for certifi's
    insecure: bool = False  # verify no certificate and no name
    client_cert: str = ""  # PEM file of the client certificate for mTLS; "" for none
    client_key: str = ""  # its private key, when not in client_cert's file
    http2: bool = False  # HTTP/2 on every connection (httpx only)
    origins: int = 1  # distinct (scheme, host, port) among the URLs: a session keeps connections to each
    lifetime: Lifetime = Lifetime()  # when a kept-alive connection is closed for a new one
    backend_header: str = ""  # a response header whose value names the server (Result.backend); "" for none
    https: bool = True  # whether any URL is https: without one, no TLS context is made unless a TLS file is named


class Session(Protocol):
    async def send(self, request: Request, hash_body: bool) -> Result:
        """Send `request` and return its Result; never raises for anything the target does."""
        ...

    async def aclose(self) -> None:
        """Close the session's connections."""
        ...

    def held(self) -> list[str]:
        """What each connection the session holds open between requests speaks ("HTTP/1.1 TLSv1.3"):
        the connections a warm-up's client hands on with it (runner.load.handoff.Handoff), which the run counts."""
        ...


class Transport(Protocol):
    def session(self) -> Session:
        """A new session: one client's own connection(s)."""
        ...


Address = tuple[int, tuple[Any, ...]]  # (address family, socket address), as connect() takes it


async def resolve(host: str, port: int) -> Sequence[Address]:
    """The addresses to try for host:port, in the resolver's order, looked up now.

    Both engines resolve through here (by way of a Resolver), before connecting, so that
    a timeout can say the DNS lookup was what took the time, and a failed lookup reads the
    same in both. An IP address takes no lookup. A name the IDNA codec refuses (an empty
    label, one over 63 characters) fails as a DNS failure with the codec's reason: it cannot
    be looked up.
    """
    known = numeric(host, port)
    if known is not None:
        return known
    try:
        host.encode("idna")
    except UnicodeError as exc:
        reason = exc.__cause__ or exc
        raise socket.gaierror(socket.EAI_NONAME, f"{host} is not a valid host name ({reason})") from exc
    found = await asyncio.wrap_future(_LOOKUPS.lookup(host, port))
    return [(family, address) for family, _, _, _, address in found]


@functools.lru_cache(maxsize=1024)
def numeric(host: str, port: int) -> tuple[Address, ...] | None:
    """host:port's one address if host is an IP address, else None; kept, as it never changes.

    A run without keep-alive connects for every request, so this is not worked out again
    each time (the answer for a name is: it may change, so it is looked up every time).
    """
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return None
    # An IP address given as text goes through the idna codec (encodings.idna, stringprep and unicodedata
    # loaded: about 1 ms of a one-request bench's start, issue 34); as the same bytes, it does not.
    found = socket.getaddrinfo(host.encode() if host.isascii() else host, port, type=socket.SOCK_STREAM,
                               flags=socket.AI_NUMERICHOST)
    return tuple((family, address) for family, _, _, _, address in found)


class _Lookups:
    """getaddrinfo calls, made in a few daemon threads of our own.

    A lookup the DNS server never answers blocks its thread for the resolver's own timeout
    (seconds, times its attempts and search domains), long after the send gave up on it.
    The event loop's pool (libuv's, under uvloop) joins its threads when the process
    exits, so a run against a silent DNS server printed its summary on time and then
    lingered until every such lookup had timed out (over a minute); daemon threads are
    not waited for. A lookup cancelled before a thread took it is not made: the Resolver
    cancels none for a dial that gives up (others may be waiting for it), but the end of the
    run cancels those still queued.
    """

    THREADS = 4  # as many lookups at once as libuv's pool would make

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[concurrent.futures.Future[Any], str, int]] = queue.SimpleQueue()
        self._threads = 0
        self._lock = threading.Lock()

    def lookup(self, host: str, port: int) -> concurrent.futures.Future[Any]:
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue.put((future, host, port))
        with self._lock:
            if self._threads < self.THREADS:
                self._threads += 1
                threading.Thread(target=self._work, name="soak-dns", daemon=True).start()
        return future

    def _work(self) -> None:
        while True:
            future, host, port = self._queue.get()
            if not future.set_running_or_notify_cancel():
                continue  # its send timed out or was cancelled while it waited
            try:
                future.set_result(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            except BaseException as exc:  # noqa: BLE001 - handed to the send, which names it
                future.set_exception(exc)


_LOOKUPS = _Lookups()


def lookup_soon(host: str, port: int) -> concurrent.futures.Future[Any]:
    """getaddrinfo(host, port) in one of _Lookups' daemon threads: for a caller outside the event
    loop that must not wait longer than it chooses (the native engine's look-ups at the start)."""
    return _LOOKUPS.lookup(host, port)


# How long a name's addresses are used before it is looked up again. Long enough that the
# resolver is not asked per connection (without keep-alive a run dials for every request,
# thousands a second), short enough that a new connection soon goes where the name now
# points: 5 s is the TTL Kubernetes' DNS (CoreDNS's kubernetes plugin) gives a Service's
# records, so a pod added to a headless Service is dialled no later than the cluster's own
# resolvers would allow. getaddrinfo does not tell a record's TTL, so it cannot be honoured.
RESOLVE_TTL_NS = 5_000_000_000


def in_turn(addresses: Sequence[Address], turn: int) -> list[Address]:
    """`addresses` for a name's `turn`-th connection: those of the resolver's first family,
    begun at the turn-th of them and wrapped round, then the others in the resolver's order.

    So that successive connections go to each of a headless Service's pods in turn, while the
    family the resolver put first is still tried first: rotating over a name's IPv6 and IPv4
    addresses together would send every other dial to the family a server may not listen on.
    """
    if len(addresses) < 2:
        return list(addresses)
    first = addresses[0][0]
    own = [a for a in addresses if a[0] == first]
    start = turn % len(own)
    return own[start:] + own[:start] + [a for a in addresses if a[0] != first]


class Answers:
    """What a Resolver knows: each name's addresses until they expire, and how many
    connections to it were dialled (the turn). Pure: the time is given."""

    def __init__(self, ttl_ns: int = RESOLVE_TTL_NS) -> None:
        self.ttl_ns = ttl_ns
        self._known: dict[tuple[str, int], tuple[int, Sequence[Address]]] = {}  # by (host, port): (when, addresses)
        self._turns: dict[tuple[str, int], int] = {}

    def fresh(self, key: tuple[str, int], now_ns: int) -> Sequence[Address] | None:
        """The addresses for `key` if they were looked up less than ttl_ns ago, else None."""
        known = self._known.get(key)
        if known is None or now_ns - known[0] >= self.ttl_ns:
            return None
        return known[1]

    def expires(self, key: tuple[str, int]) -> int | None:
        """When the addresses kept for `key` stop being fresh (monotonic ns), or None if none are kept."""
        known = self._known.get(key)
        return None if known is None else known[0] + self.ttl_ns

    def keep(self, key: tuple[str, int], addresses: Sequence[Address], now_ns: int) -> None:
        """Keep `addresses`, looked up at `now_ns` (an answer with none is not kept)."""
        if addresses:
            self._known[key] = (now_ns, addresses)

    def next_turn(self, key: tuple[str, int], addresses: Sequence[Address]) -> list[Address]:
        """The order for the next connection to `key` (see in_turn); each call is one more turn."""
        turn = self._turns.get(key, 0)
        self._turns[key] = turn + 1
        return in_turn(addresses, turn)


class Resolver:
    """Looks up names for a transport's new connections: again for each connection once the
    last answer is RESOLVE_TTL_NS old, and never more than one lookup of a name at a time
    (dials that need it meanwhile wait for that one). Failures are not kept: the next
    connection asks again.

    A lookup is shared, so a dial that gives up on it (its timeout) leaves it running for
    the others; one the DNS server never answers then blocks one of _Lookups' threads, not
    one per dial. One Resolver per transport, used from its event loop only.
    """

    def __init__(self, ttl_ns: int = RESOLVE_TTL_NS, clock: Callable[[], int] = time.monotonic_ns) -> None:
        self._answers = Answers(ttl_ns)
        self._clock = clock
        self._pending: dict[tuple[str, int], asyncio.Future[Sequence[Address]]] = {}

    async def resolve(self, host: str, port: int) -> Sequence[Address]:
        """The addresses for a new connection to host:port, in the order to try them."""
        known = numeric(host, port)
        if known is not None:
            return known
        key = (host, port)
        addresses = self._answers.fresh(key, self._clock())
        if addresses is None:
            pending = self._pending.get(key)
            if pending is None:
                pending = self._pending[key] = asyncio.ensure_future(resolve(host, port))
                pending.add_done_callback(lambda done: self._looked_up(key, done))
            addresses = await asyncio.shield(pending)
        return self._answers.next_turn(key, addresses)

    def _looked_up(self, key: tuple[str, int], done: asyncio.Future[Sequence[Address]]) -> None:
        del self._pending[key]
        if not done.cancelled() and done.exception() is None:  # a failure is each waiting dial's to report
            self._answers.keep(key, done.result(), self._clock())


def address_text(address: tuple[Any, ...]) -> str:
    """A socket address as a reader writes it: 127.0.0.1:80, [::1]:80."""
    host, port = address[0], address[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
