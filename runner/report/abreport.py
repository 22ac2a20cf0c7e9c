"""ab's text output (ApacheBench 2.3) for a bench run: the report, and the lines around it.

The report is a pure function of the JSON summary's dict (its "bench" section), so it can
be printed again from a saved summary. Its labels, order and number formats are ab's own
printf formats from ab.c, checked against real ab output (tests/golden/ab-nginx.txt):
people read ab reports by eye and by script, and both should keep working.

Times in the summary are milliseconds to the microsecond, ab's own resolution, so rounding
them here (half up, as ab's ap_round_ms) gives the numbers ab would print.
"""

from __future__ import annotations

from typing import Any, TextIO
from urllib.parse import urlsplit

from runner.core import redact
from runner.report.base import Reporter
from runner.report.clientnotes import BUSY_NOTE, run_note
from runner.report.slowcooker import drain_error_lines, error_lines
from runner.stats.recorder import Interval
from runner.stats.runinfo import RunInfo, RunSummary

PERCENTAGES = (50, 66, 75, 80, 90, 95, 98, 99)  # then 100, "(longest request)"
# The note after the report when ab's "Time per request" (mean) is no request's time: when the
# share of the clients' time spent in requests (Total's mean over it) is below BUSY_SHARE, i.e.
# the clients kept a tenth fewer requests in flight than asked, or more: ab, whose clients
# turn round faster, would have given the server more at once, and its latencies would differ.
BUSY_SHARE = 0.9
ROWS = (("connect", "Connect:    "), ("processing", "Processing: "), ("waiting", "Waiting:    "),
        ("total", "Total:      "))
# ab's names for the phases in its sanity warnings.
SANITY_NAMES = {"connect": "the initial connection time", "processing": "the processing time",
                "waiting": "the waiting time", "total": "the total time"}


def heartbeat(total_requests: int) -> int:
    """How often ab prints "Completed N requests": every 10% of -n, at most every 100; 0 for none.

    As ab.c: only when there are more than 150 requests.
    """
    if total_requests <= 150:
        return 0
    return max(total_requests // 10, 100)


def banner(host: str, every: int) -> str:
    """ab's first line of the run; without progress lines it is finished by "..done"."""
    return f"Benchmarking {host} (be patient)" + ("\n" if every else "...")


def progress_line(done: int) -> str:
    return f"Completed {done} requests\n"


def finished_line(done: int, every: int) -> str:
    """ab's last line before the report: on stderr after progress lines, else "..done" on stdout."""
    return f"Finished {done} requests\n" if every else "..done\n"


def round_ms(ms: float) -> int:
    """ab's ap_round_ms: microseconds to whole milliseconds, halves up."""
    return (round(ms * 1000) + 500) // 1000


def report(summary: dict[str, Any]) -> str:
    """ab's report, from the summary dict: from the two blank lines to the longest request."""
    b = summary["bench"]
    lines = [
        "",
        "",
        f"Server Software:        {redact.printable(b['server'])}",
        f"Server Hostname:        {b['host']}",
        f"Server Port:            {b['port']}",
        "",
        f"Document Path:          {b['path']}",
        f"Document Length:        {b['documentLength']} bytes",
        "",
        f"Concurrency Level:      {b['concurrency']}",
        f"Time taken for tests:   {b['timeTakenSeconds']:.3f} seconds",
        f"Complete requests:      {b['complete']}",
        f"Failed requests:        {b['failed']}",
    ]
    if b["failed"]:
        f = b["failures"]
        lines.append(f"   (Connect: {f['connect']}, Receive: {f['receive']}, Length: {f['length']}, "
                     f"Exceptions: {f['exceptions']})")
    if b["non2xx"]:
        lines.append(f"Non-2xx responses:      {b['non2xx']}")
    if b["keepAlive"]:
        lines.append(f"Keep-Alive requests:    {b['keepAliveRequests']}")
    lines.append(f"Total transferred:      {b['totalTransferred']} bytes")
    if b["bodySent"]:
        lines.append(f"Total body sent:        {b['bodySent']}")
    lines.append(f"HTML transferred:       {b['htmlTransferred']} bytes")
    lines += _rates(b)
    if b["complete"] > 0:
        lines += _connection_times(b["phases"])
    if b["complete"] > 1:
        lines += _served_within(b["servedWithin"])
    return "\n".join(lines) + "\n"


def report_with_notes(summary: dict[str, Any]) -> str:
    """ab's report, then our note on it when one is due (busy_note): ab's lines stay ab's."""
    return report(summary) + busy_note(summary["bench"])


def busy_note(b: dict[str, Any]) -> str:
    """A line saying the clients were not always in a request, when ab's figures hide it; "" if they were.

    ab's "Time per request" (mean) is concurrency x time taken / complete requests: what each
    request would take if every client were always waiting for a response. When the client
    cannot keep its connections busy (without keep-alive, a connection per request costs the
    client more than the server; with it, the client's own turn between requests can be longer
    than the server's answer), the requests themselves took less (Total's mean), the figure
    measures the client's pace, and the server, given fewer requests at once than asked, may
    answer faster than it would under ab. ab would print its figures all the same.
    """
    taken, done, clients = b["timeTakenSeconds"], b["complete"], b["concurrency"]
    if not taken or not done:
        return ""
    per_request = clients * taken * 1000 / done  # as ab prints it
    took = b["phases"]["total"]["mean"]
    share = took / per_request
    if share >= BUSY_SHARE:
        return ""
    rest = ("the rest went on failed requests (which are not timed) and on the client's own work between requests"
            if b["failed"] else f"the client kept {share * clients:.1f} of its {clients} requests in flight on average,"
                                " so its pace, not the server's, set the rates above, and a server given that many "
                                f"at once may answer faster than under ab's {clients}")
    return (f"{BUSY_NOTE}{share:.0%} of the time: Time per request {per_request:.3f} [ms] (mean) counts {clients} "
            f"clients as always waiting for a response, but a request took {took:.3f} ms (Total, mean); {rest}\n")


def _rates(b: dict[str, Any]) -> list[str]:
    taken, done = b["timeTakenSeconds"], b["complete"]
    if not taken or not done:
        return []
    lines = [
        f"Requests per second:    {done / taken:.2f} [#/sec] (mean)",
        f"Time per request:       {b['concurrency'] * taken * 1000 / done:.3f} [ms] (mean)",
        f"Time per request:       {taken * 1000 / done:.3f} [ms] (mean, across all concurrent requests)",
        f"Transfer rate:          {b['totalTransferred'] / 1024 / taken:.2f} [Kbytes/sec] received",
    ]
    if b["bodySent"]:
        lines.append(f"                        {b['bodySent'] / taken / 1024:.2f} kb/s sent")
        lines.append(f"                        {(b['totalTransferred'] + b['bodySent']) / taken / 1024:.2f} kb/s total")
    return lines


def _connection_times(phases: dict[str, dict[str, Any]]) -> list[str]:
    """The min/mean/sd/median/max table, then ab's warnings where mean and median disagree."""
    lines = ["", "Connection Times (ms)", "              min  mean[+/-sd] median   max"]
    for name, label in ROWS:
        p = phases[name]
        lines.append(f"{label}{round_ms(p['min']):5d} {round_ms(p['mean']):4d} {p['sd']:5.1f} "
                     f"{round_ms(p['median']):6d} {round_ms(p['max']):7d}")
    for name, _ in ROWS:
        lines += sanity_lines(SANITY_NAMES[name], phases[name])
    return lines


def sanity_lines(what: str, phase: dict[str, Any]) -> list[str]:
    """ab's SANE(): the whole-ms mean and median more than one (warning) or two (error) sd apart."""
    apart = abs(round_ms(phase["mean"]) - round_ms(phase["median"]))
    sd = phase["sd"]
    if apart > 2 * sd:
        return [f"ERROR: The median and mean for {what} are more than twice the standard",
                "       deviation apart. These results are NOT reliable."]
    if apart > sd:
        return [f"WARNING: The median and mean for {what} are not within a normal deviation",
                "        These results are probably not that reliable."]
    return []


def _served_within(served: dict[str, float]) -> list[str]:
    lines = ["", "Percentage of the requests served within a certain time (ms)"]
    lines += [f"  {p}%  {round_ms(served[str(p)]):5d}" for p in PERCENTAGES]
    lines.append(f" 100%  {round_ms(served['100']):5d} (longest request)")
    return lines


class AbReporter(Reporter):
    """ab's lines around the report: the banner, "Completed N requests" as sends finish, the end.

    Progress goes to stderr as ab prints it, with the failures of each interval (one line per
    distinct error, with a count); the banner and "..done" go to `out`. The report itself
    is printed with the JSON summary, from the same dict (see summary.JsonSummaryReporter).
    """

    def __init__(self, out: TextIO, err: TextIO, total_requests: int) -> None:
        self._out = out
        self._err = err
        self.progress_every = heartbeat(total_requests)

    def start(self, info: RunInfo) -> None:
        self._write(self._out, banner(urlsplit(info.urls[0]).hostname or "", self.progress_every))

    def progress(self, info: RunInfo, done: int) -> None:
        self._write(self._err, progress_line(done))

    def interval(self, info: RunInfo, interval: Interval) -> None:
        self._write(self._err, "".join(error_lines(info.settings.request.method, info.urls, interval.tally)))

    def finish(self, summary: RunSummary) -> None:
        stream = self._err if self.progress_every else self._out
        self._write(self._err, drain_error_lines(summary))  # failures after the last interval (-t)
        self._write(stream, finished_line(summary.tally.requests, self.progress_every))
        self._write(self._err, run_note(summary))  # ab's report itself stays ab's

    @staticmethod
    def _write(stream: TextIO, text: str) -> None:
        if text:
            stream.write(text)
            stream.flush()
