"""What a run counts that its thresholds may judge, named once: for the rules (runner.config.rules)
and for the tallies that count it (runner.stats). Here, not in the rules: every run counts these,
and only a run with thresholds loads the rules' parser (issue 34: a plain bench does not).
"""

# Where a response's time went (runner.stats.phases); a latency rule may name one, `connect.p99 < 5ms`.
PHASES = ("dns", "connect", "tls", "ttfb", "body")
# The backends a tally counts by name (runner.stats.recorder.Tally.count_backend, the native engine's
# SOAK_BACKENDS_KEPT): up to this many, how many answered is exact; beyond, it is this, "at least".
BACKENDS_KEPT = 100
