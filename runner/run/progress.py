"""Finished sends, told to the reporters that follow progress (ab's `Completed N requests`) at their steps.

Whichever engine sends, its run tells this of the sends it has finished: the Python engine's
one at a time, as each result is counted (one comparison each), the native engine's as a count
read now and then (runner.run.engines). Each reporter is told of every multiple of its
progress_every, in order, once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from runner.report.base import Reporter


class Progress:
    """The steps of the reporters that follow progress, and how far the finished sends have come."""

    def __init__(self, reporters: Sequence[Reporter], tell: Callable[[Reporter, int], None]) -> None:
        """`reporters`: those with a progress_every; `tell(reporter, done)`: tells one of them of a step."""
        self._reporters = reporters
        self._tell = tell
        self.done = 0  # finished sends, as far as told
        self._next = min(r.progress_every for r in reporters)

    def one(self) -> None:
        """One more send finished."""
        self.done += 1
        if self.done == self._next:
            self._steps()

    def reached(self, done: int) -> None:
        """`done` sends have finished: every step up to it, in order."""
        while (step := self._next) <= done:
            self.done = step
            self._steps()

    @property
    def next_step(self) -> int:
        """The finished sends at which a reporter is next told (the native engine tells the loop there)."""
        return self._next

    def _steps(self) -> None:
        done = self.done
        for reporter in self._reporters:
            if done % reporter.progress_every == 0:
                self._tell(reporter, done)
        self._next = min(done + r.progress_every - done % r.progress_every for r in self._reporters)


def progress_of(reporters: Sequence[Reporter], tell: Callable[[Reporter, int], None]) -> Progress | None:
    """The progress that `reporters` follow; None when none of them does."""
    following = [r for r in reporters if r.progress_every > 0]
    return Progress(following, tell) if following else None
