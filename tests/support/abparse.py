"""ab's report read back into the summary's "bench" section: for checking ours against ab's own output."""

from __future__ import annotations

import re
from typing import Any

PHASE_ROWS = {"Connect": "connect", "Processing": "processing", "Waiting": "waiting", "Total": "total"}


def parse_ab(text: str) -> dict[str, Any]:
    """The summary dict's "bench" section (wrapped in a summary) from ab's stdout."""
    fields: dict[str, str] = {}
    phases: dict[str, dict[str, float]] = {}
    served: dict[str, float] = {}
    for line in text.splitlines():
        if m := re.fullmatch(r"(Connect|Processing|Waiting|Total): +(\d+) +(\d+) +([\d.]+) +(\d+) +(\d+)", line):
            low, mean, sd, median, high = m.groups()[1:]
            phases[PHASE_ROWS[m[1]]] = {"min": int(low), "mean": int(mean), "sd": float(sd), "median": int(median),
                                        "max": int(high)}
        elif m := re.fullmatch(r" +(\d+)% +(\d+)( \(longest request\))?", line):
            served[m[1]] = int(m[2])
        elif m := re.fullmatch(r"   \(Connect: (\d+), Receive: (\d+), Length: (\d+), Exceptions: (\d+)\)", line):
            fields["failures"] = m.group(0)
            failures = dict(zip(("connect", "receive", "length", "exceptions"), map(int, m.groups())))
        elif ":" in line:
            label, _, value = line.partition(":")
            fields.setdefault(label, value.strip())
    complete = int(fields["Complete requests"])
    bench = {
        "server": fields["Server Software"],
        "host": fields["Server Hostname"],
        "port": int(fields["Server Port"]),
        "path": fields["Document Path"],
        "documentLength": int(fields["Document Length"].split()[0]),
        "concurrency": int(fields["Concurrency Level"]),
        "keepAlive": "Keep-Alive requests" in fields,
        # ab's own time, to the precision its rate was printed with.
        "timeTakenSeconds": complete / float(fields["Requests per second"].split()[0]),
        "complete": complete,
        "failed": int(fields["Failed requests"]),
        "failures": failures if "failures" in fields else dict.fromkeys(("connect", "receive", "length", "exceptions"), 0),
        "non2xx": int(fields.get("Non-2xx responses", 0)),
        "keepAliveRequests": int(fields.get("Keep-Alive requests", 0)),
        "totalTransferred": int(fields["Total transferred"].split()[0]),
        "htmlTransferred": int(fields["HTML transferred"].split()[0]),
        "bodySent": int(fields.get("Total body sent", 0)),
        "phases": phases,
        "servedWithin": served,
    }
    return {"bench": bench}
