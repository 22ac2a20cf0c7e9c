"""The reporter interface: what reporters are told, and when: at the start, after each interval, at the end.

Reporters turn these plain records into text or files. They never touch the target (the
metrics reporter's only traffic is pushes to a Pushgateway, from a thread of their own) and
never see a Result: by the time they hear of an interval it is counts and histograms.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: `soak --help` loads this interface (commands.outputs), not the stats
    from collections.abc import Callable

    from runner.stats.recorder import Interval
    from runner.stats.runinfo import RunInfo, RunSummary


class Reporter:
    """Told of a run at its start, after each interval, and at the end; each hook does nothing
    unless a reporter overrides it, so a reporter writes only the hooks it needs."""

    # Call progress() each time this many more sends have finished; 0: never. (ab prints
    # "Completed N requests" as it goes; the count is kept by the run, not per result here.)
    progress_every: int = 0

    def bind_stop(self, stop: Callable[[str], None]) -> None:
        """Before start(): `stop(reason)` ends the run early, exactly as a first SIGTERM does.

        For a reporter that judges the run (the thresholds' verdict) and may know before the
        end that it has failed; it never touches the target, it only asks the run to stop.
        """

    def start(self, info: RunInfo) -> None:
        """Before the first send."""

    def progress(self, info: RunInfo, done: int) -> None:
        """When `done`, a multiple of progress_every, sends have finished."""

    def interval(self, info: RunInfo, interval: Interval) -> None:
        """After each interval has closed, the last (perhaps partial) one included."""

    def warmup(self, info: RunInfo, interval: Interval) -> None:
        """After each interval of the warm-up (runner.run.warmup) has closed: not the run's, never judged."""

    def finish(self, summary: RunSummary) -> None:
        """Once, after the last interval."""
