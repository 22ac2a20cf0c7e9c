"""The JSON summary's key names, each written once: the summary is built with them here and
read back with them by `compare`, `plot` and `merge` (runner.readback), so a renamed key is a
change in one place, not a string that quietly stops matching elsewhere.

Latency percentiles keep slow_cooker's own names (p50 ... p999), first in the summary.
"""

from __future__ import annotations

# The run: counts, goal and rate.
LATENCY_UNIT = "latencyUnit"
MIN, MEAN, MAX, STDEV = "min", "mean", "max", "stdev"
REQUESTS, GOOD, BAD, FAILED, SKIPPED = "requests", "good", "bad", "failed", "skipped"
LATE = "late"  # sends that left late by the client's own delay (not skipped)
LATENCY_CLOCK = "latencyClock"  # whose clock timed the responses: the kernel's, the loop's, or both
GOAL_PERCENT = "goalPercent"
RATE, RATE_TARGET, RATE_ACHIEVED = "rate", "target", "achieved"
STATUS_CODES, ERRORS = "statusCodes", "errors"
HASH_CHECKED, HASH_MISMATCHES = "hashChecked", "hashMismatches"
BYTES_IN, BYTES_OUT = "bytesIn", "bytesOut"
# Time.
START, END = "start", "end"
DURATION_SECONDS, SENDING_SECONDS = "durationSeconds", "sendingSeconds"
INTERVALS, STOP_REASON = "intervals", "stopReason"
ENGINE = "engine"  # which engine sent the run: native or python
# What else the run measured.
CONNECTIONS, UNCORRECTED, SEND_LAG_US = "connections", "uncorrected", "sendLagUs"
CONNECTIONS_OPENED, CONNECTIONS_CLOSED = "connectionsOpened", "connectionsClosed"  # in each interval's too
BACKENDS, BACKENDS_REACHED = "backends", "backendsReached"  # with a backendHeader; in each interval's too
BENCH, INTERVAL_STATS = "bench", "intervalStats"
HISTOGRAM, HISTOGRAM_UNIT, HISTOGRAM_HDR = "histogram", "unit", "hdr"
PROCESS, CPU_SECONDS, MAX_RSS_BYTES = "process", "cpuSeconds", "maxRssBytes"
CONFIG, SHARDS, FAILED_WORKERS, SHARD = "config", "shards", "failedWorkers", "shard"
DRAIN = "drain"  # what came back after the last interval ended
# Where the time went: per phase (runner.stats.phases.PHASES), COUNT and MIN, MEAN, MAX and the
# PHASE_PERCENTILES in ms.
PHASES, COUNT = "phases", "count"
# Per URL (a list, one entry per url label, beside REQUESTS, GOOD, BAD, FAILED, ERRORS, STATUS_CODES,
# MIN, MEAN, MAX and the percentiles).
PER_URL, URL, URLS = "perUrl", "url", "urls"
WARMUP = "warmup"  # what the warm-up before the run measured, apart from the run
# The thresholds' verdict (runner.report.verdict.Verdict.section writes it): passed, inconclusive,
# stoppedEarly and one record per rule (Outcome.record).
THRESHOLDS, RULES, STOPPED_EARLY = "thresholds", "rules", "stoppedEarly"
LAST_GOOD_RATE = "lastGoodRate"  # stopAtBrokenRule: the target rate of the last interval that kept the rules
# The client's own figures, and whether its delay may have changed a figure (stats.client.Pace.saturated).
CLIENT_SATURATED, CLIENT = "clientSaturated", "client"
CPU_PERCENT, LOOP_LAG_MS, LATENESS_MS, SATURATED_INTERVALS = "cpuPercent", "loopLagMs", "latenessMs", \
    "saturatedIntervals"

# One entry of intervalStats (beside GOOD, BAD, FAILED, SKIPPED, GOAL_PERCENT, END, ERRORS,
# MIN, MAX and the percentiles).
ITER, INTERVAL, GOAL_T, BHASH = "iter", "interval", "t", "bhash"

# The bench section: ab's report is made from these.
BENCH_REQUESTS_PER_SECOND = "requestsPerSecond"
