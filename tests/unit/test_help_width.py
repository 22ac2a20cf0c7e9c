"""The help's width (runner.cli._columns): what argparse asked shutil for, without importing shutil.

argparse makes a formatter for every flag added and asked shutil.get_terminal_size for its width;
the CLI now gives the width itself (shutil brought bz2 and lzma to every run's start, issue 34).
"""

from __future__ import annotations

import shutil

import pytest

from runner import cli


@pytest.mark.parametrize("columns", [None, "", "abc", "-5", "0", "1", "60", "250"])
def test_the_width_is_shutils(columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LINES", raising=False)
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert cli._columns() == shutil.get_terminal_size().columns


def test_the_help_is_wrapped_at_that_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """A formatter as argparse made one from shutil's width (less its margin of 2)."""
    monkeypatch.setenv("COLUMNS", "70")
    assert cli._formatter("soak")._width == 68
