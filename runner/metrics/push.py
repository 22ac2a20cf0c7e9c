"""Pushing the run's metrics to a Prometheus Pushgateway, after every interval and at the end.

A CronJob's pod is gone minutes after its run, often before a scrape reaches it; what it
pushed stays on the Pushgateway for Prometheus to scrape, the final verdict included. The
grouping key is the job (pushgatewayJob, "soak" by default) and the pod's index
(pod_index: JOB_COMPLETION_INDEX in an Indexed Job, else 0), so each run replaces the last
one's figures (a push is an HTTP PUT of the whole group) and the shards of a run sit side by side.

Groups outlive their runs: a scaled-out run of 5 shards followed by one of 3 would leave the
groups of pod_index 3 and 4 on the Pushgateway for ever, their figures never finishing again.
So, as a run starts, its shard 0 deletes the groups of its job whose pod_index is at or above
the run's shard count (stale_indexes); a run alone (shards 1, not in an Indexed Job) deletes
those from 1 up. A plain Indexed Job whose pods each send the whole load (shards 1, each pod's
index from JOB_COMPLETION_INDEX) does not know how many pods it has, and deletes nothing.

Pushes happen on a thread of their own, one at a time and in order, so a slow or absent
Pushgateway never holds up sending. Every push carries the whole run so far (the counters
are cumulative), so one that fails loses nothing: the next carries its counts. A failure
is one line on stderr, at most one per push and so at most one per interval, and never
stops the run.
"""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, TextIO

from prometheus_client import CollectorRegistry, delete_from_gateway, push_to_gateway

from runner.core import redact
from runner.core.errors import UsageError
from runner.load.shards import INDEX_ENV, Shard, completion_index
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
        self._clean_from: int | None = None  # delete the job's groups from this pod index up, before the first push
        self.deleted: list[str] = []  # the pod indexes whose groups were deleted
        self._unclean = ""  # why they could not be, until said
        self._thread = threading.Thread(target=self._loop, name="pushgateway", daemon=True)

    def start(self, info: RunInfo) -> None:
        """Group the pushes under this pod's index, and begin: shard 0 first deletes the stale groups."""
        self.grouping_key = {"pod_index": pod_index(info.shard)}
        self._clean_from = cleans_from(info.shard)
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
        if self._clean_from is not None:
            self._clean(self._clean_from)
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
            if self._unclean:
                self._say(self._unclean)
            self._unclean = ""
        except Exception as e:  # anything at all: a push must never stop the run
            self.failures += 1
            self._unclean = ""
            final = self._final is not None and ask >= self._final  # no next push to carry the counts
            self._say(f"{_reason(e)}; " + ("the final figures and verdict were not pushed" if final
                                           else "the counts are kept and go with the next push"))

    def _clean(self, count: int) -> None:
        """Delete the groups of this job from pod index `count` up (a run with fewer pods than the last)."""
        try:
            with urllib.request.urlopen(f"{self.url.rstrip('/')}/api/v1/metrics", timeout=self._timeout_s) as answer:
                groups = json.loads(answer.read())
            for index in stale_indexes(groups, self.job, count):
                delete_from_gateway(self.url, self.job, {"pod_index": index}, timeout=self._timeout_s)
                self.deleted.append(index)
        except Exception as e:  # anything at all: never the run's end, and the pushes go on
            # Said after the first push, if that one went through: a Pushgateway that is down or
            # refuses everything is told by the pushes' own lines, not once more here.
            self._unclean = f"{_reason(e)}; the groups of pods beyond this run's {count} were not deleted"

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


def cleans_from(shard: Shard, environ: Mapping[str, str] = os.environ) -> int | None:
    """From which pod index this process deletes its job's groups as the run starts: shard 0 of a run
    split over pods, from the shard count; a run alone outside an Indexed Job, from 1; else None."""
    if shard.count > 1:
        return shard.count if shard.index == 0 else None
    return None if environ.get(INDEX_ENV, "").strip() else 1


def stale_indexes(groups: Any, job: str, count: int) -> list[str]:
    """The pod indexes of `job`'s groups at or above `count`, from the Pushgateway's /api/v1/metrics
    answer; only the groups keyed by job and pod_index alone, as the runner pushes them."""
    found = []
    data = groups.get("data") if isinstance(groups, dict) else None
    for group in data if isinstance(data, list) else []:
        labels = group.get("labels", {}) if isinstance(group, dict) else {}
        index = labels.get("pod_index", "")
        if set(labels) == {"job", "pod_index"} and labels["job"] == job and index.isdecimal() and int(index) >= count:
            found.append(index)
    return sorted(found, key=int)


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
