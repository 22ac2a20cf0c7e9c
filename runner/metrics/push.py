"""Pushing the run's metrics to a Prometheus Pushgateway, after every interval and at the end.

A CronJob's pod is gone minutes after its run, often before a scrape reaches it; what it
pushed stays on the Pushgateway for Prometheus to scrape, the final verdict included. The
grouping key is the job (pushgatewayJob, "soak" by default) and the pod's index
(pod_index: JOB_COMPLETION_INDEX in an Indexed Job, else 0), so each run replaces the last
one's figures (a push is an HTTP PUT of the whole group) and the shards of a run sit side by side.

Pushes happen on a thread of their own, one at a time and in order, so a slow or absent
Pushgateway never holds up sending. Every push carries the whole run so far (the counters
are cumulative), so one that fails loses nothing: the next carries its counts. A failure
is one line on stderr, at most one per push and so at most one per interval, and never
stops the run.
"""

from __future__ import annotations

import os
import threading
import urllib.error
from collections.abc import Mapping
from typing import TextIO

from prometheus_client import CollectorRegistry, push_to_gateway

from runner.core import redact
from runner.core.errors import UsageError
from runner.load.shards import Shard, completion_index
from runner.stats.runinfo import RunInfo

PUSH_TIMEOUT_S = 5.0  # one push, connecting included
FINAL_WAIT_S = 2 * PUSH_TIMEOUT_S + 1  # at the end: a push still under way, then the final one


class Pusher:
    """Pushes `registry` to the Pushgateway at `url` when asked, from its own thread."""

    def __init__(self, url: str, job: str, registry: CollectorRegistry, err: TextIO,
                 *, timeout_s: float = PUSH_TIMEOUT_S) -> None:
        self.url = url
        self.job = job
        self.grouping_key = {"pod_index": "0"}
        self._registry = registry
        self._err = err
        self._timeout_s = timeout_s
        self._cond = threading.Condition()
        self._asked = 0  # pushes asked for so far
        self._taken = 0  # the last ask a push has started for (it serves every ask up to it)
        self._done = 0  # the last ask a finished push served
        self._closing = False
        self._final: int | None = None  # the final push's ask, once asked for
        self.failures = 0
        self._thread = threading.Thread(target=self._loop, name="pushgateway", daemon=True)

    def start(self, info: RunInfo) -> None:
        """Group the pushes under this pod's index, and begin."""
        self.grouping_key = {"pod_index": pod_index(info.shard)}
        self._thread.start()

    def push_soon(self) -> int:
        """Ask for a push of the figures as they are when it starts; returns the ask's number."""
        with self._cond:
            self._asked += 1
            self._cond.notify_all()
            return self._asked

    def push_final(self) -> bool:
        """Push the final figures and wait (boundedly) until they are on the Pushgateway; True if they are."""
        ask = self.push_soon()
        with self._cond:
            self._final = ask
            self._cond.wait_for(lambda: self._done >= ask, timeout=FINAL_WAIT_S)
            done = self._done >= ask
        if not done:
            self._say(f"no answer within {FINAL_WAIT_S:g}s: the final figures may not have been pushed")
        return done

    def close(self) -> None:
        with self._cond:
            self._closing = True
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=self._timeout_s + 1)

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._taken < self._asked or self._closing)
                if self._taken == self._asked:
                    return  # closing, with nothing left to push
                self._taken = ask = self._asked
            self._push(ask)
            with self._cond:
                self._done = ask
                self._cond.notify_all()

    def _push(self, ask: int) -> None:
        try:
            push_to_gateway(self.url, self.job, self._registry, self.grouping_key, timeout=self._timeout_s)
        except Exception as e:  # anything at all: a push must never stop the run
            self.failures += 1
            final = self._final is not None and ask >= self._final  # no next push to carry the counts
            self._say(f"{_reason(e)}; " + ("the final figures and verdict were not pushed" if final
                                           else "the counts are kept and go with the next push"))

    def _say(self, text: str) -> None:
        self._err.write(f"soak: pushgateway {redact.url(self.url)}: {redact.printable(text)}\n")
        self._err.flush()


def _reason(error: Exception) -> str:
    """A push's failure in a few words, on one line."""
    if isinstance(error, urllib.error.HTTPError):
        body = error.read(300).decode("utf-8", "replace") if error.fp is not None else ""
        said = " ".join(body.split())
        return f"HTTP {error.code} {error.reason}" + (f": {said}" if said else "")
    if isinstance(error, urllib.error.URLError):
        reason = error.reason
        return getattr(reason, "strerror", None) or str(reason)
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    return str(error) or type(error).__name__


def pod_index(shard: Shard, environ: Mapping[str, str] = os.environ) -> str:
    """The grouping key's pod index: the shard's, or in a plain Indexed Job (shards: 1, every
    pod the whole load) the Job's JOB_COMPLETION_INDEX, so the pods do not overwrite each
    other's figures and verdicts."""
    if shard.count > 1:
        return str(shard.index)
    try:
        return str(completion_index(environ))
    except UsageError:  # not a whole number: not worth failing a finished run's pushes for
        return "0"
