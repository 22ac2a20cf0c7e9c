"""Sharing the pod with the Linkerd proxy: wait until it is ready, and let it go at the end.

With the proxy injected, every request the runner sends goes through it, so requests sent
before it is ready fail for reasons that have nothing to do with the service: the first
send waits for the proxy's readiness endpoint (its admin server, GET /ready), bounded. A
Job whose proxy is a classic sidecar never completes while the proxy runs; the runner can
ask it to shut down (POST /shutdown) when the run ends, however it ends. Both speak plain
HTTP/1.1 to the admin server on loopback, as Linkerd's own linkerd-await does.

The run itself is unchanged: this only happens before the first send and after the last.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from runner import __version__
from runner.config.settings import Settings
from runner.core import redact
from runner.core.durations import format_duration

READY_PATH = "/ready"
SHUTDOWN_PATH = "/shutdown"
POLL_S = 0.2  # between readiness probes
PROBE_TIMEOUT_S = 1.0  # one probe's limit: the admin server is in the pod, on loopback
SHUTDOWN_TIMEOUT_S = 5.0
_ANSWER_CHARS = 80
# Said when the proxy answers /shutdown with 404: off, as Linkerd 2.16 and later have it unless enabled.
SHUTDOWN_HINT = "annotate the pod config.linkerd.io/proxy-admin-shutdown: enabled"


@contextmanager
def proxy_lifecycle(settings: Settings, say: Callable[[str], None]) -> Iterator[bool]:
    """Around a run: yield whether to send (the proxy is ready, or not awaited); after it,
    ask the proxy to shut down if the settings say so, whether the run happened or not."""
    admin = parse_admin(settings.linkerd.admin) if settings.linkerd.wait or settings.linkerd.shutdown else None
    try:
        ready = True
        if admin is not None and settings.linkerd.wait:
            with _sigterm_interrupts():
                ready, line = await_ready(admin, settings.linkerd.wait_timeout_ns)
            say(line)
        yield ready
    finally:
        if admin is not None and settings.linkerd.shutdown:
            say(shutdown(admin))


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """While waiting, SIGTERM interrupts like SIGINT, so the shutdown after it still happens
    (the run installs its own handlers once it starts; before, SIGTERM would just kill us)."""
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def parse_admin(text: str) -> tuple[str, int]:
    """(host, port) of a `host:port` the schema checked (its form, its host and its port's range), so that
    `soak validate` refuses what the run would."""
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def await_ready(
    admin: tuple[str, int], timeout_ns: int, clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[bool, str]:
    """Probe /ready until it answers 200 or `timeout_ns` has passed: (ready, a line saying so)."""
    url = _url(admin, READY_PATH)
    start = clock()
    deadline = start + timeout_ns / 1e9
    last = "no answer"
    while (remaining := deadline - clock()) > 0:
        status, last = _ask("GET", admin, READY_PATH, min(PROBE_TIMEOUT_S, remaining))
        if status == 200:
            return True, f"linkerd proxy ready after {clock() - start:.1f}s (GET {url}: {last})"
        sleep(max(0.0, min(POLL_S, deadline - clock())))
    return False, (f"linkerd proxy not ready after {format_duration(timeout_ns)} (GET {url}, last: {last}); "
                   "nothing was sent")


def shutdown(admin: tuple[str, int]) -> str:
    """Ask the proxy to shut down; a line saying whether it agreed. Never raises: the run is over."""
    url = _url(admin, SHUTDOWN_PATH)
    status, answer = _ask("POST", admin, SHUTDOWN_PATH, SHUTDOWN_TIMEOUT_S)
    if status == 200:
        return f"linkerd proxy asked to shut down (POST {url}: {answer})"
    hint = f"; {SHUTDOWN_HINT}" if status == 404 else ""
    return f"linkerd proxy did not agree to shut down (POST {url}: {answer}){hint}"


def _ask(method: str, admin: tuple[str, int], path: str, timeout_s: float) -> tuple[int, str]:
    """One request to the admin server: (status, 0 without an answer; the answer in a few words)."""
    import http.client  # here: only a meshed run talks to the proxy (http.client loads email's parser too)

    connection = http.client.HTTPConnection(*admin, timeout=timeout_s)
    try:
        connection.request(method, path, headers={"User-Agent": f"soak/{__version__}"})
        response = connection.getresponse()
        body = response.read(_ANSWER_CHARS).decode("utf-8", "replace").strip().splitlines()
        return response.status, redact.printable(f"{response.status} {body[0] if body else response.reason}")
    except ConnectionRefusedError:
        return 0, "connection refused"
    except TimeoutError:
        return 0, f"no answer within {timeout_s:g}s"
    except (OSError, http.client.HTTPException) as e:
        return 0, redact.printable(getattr(e, "strerror", None) or str(e) or type(e).__name__)
    finally:
        connection.close()


def _url(admin: tuple[str, int], path: str) -> str:
    host, port = admin
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{path}"
