"""`soak compare`: runs side by side, each against the first, in one latency unit."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.commands.compare import compare_text
from runner.readback.results import read_run
from tests.conftest import GOLDEN, run_soak
from tests.support.runlogs import REPLICAS_1, REPLICAS_10, kubectl_logs


def files(tmp_path: Path, **texts: str) -> list[str]:
    paths = []
    for name, text in texts.items():
        path = tmp_path / name.replace("_", "-")
        path.write_text(text)
        paths.append(str(path))
    return paths


def test_soak_compare_prints_the_table_and_the_notes_on_stderr(tmp_path: Path) -> None:
    paths = files(tmp_path, replicas_1=REPLICAS_1, replicas_10=REPLICAS_10)
    cut = tmp_path / "cut.log"
    cut.write_text((GOLDEN / "100qps-ms.log").read_text()[:400])
    run = run_soak("compare", *paths, str(cut))
    assert run.returncode == 0, run.stderr
    runs = [read_run(p) for p in [*paths, str(cut)]]
    assert run.stdout == compare_text(runs)
    assert run.stderr.splitlines() == [f"{cut}: {note}" for note in runs[2].notes]
    assert any("no JSON summary" in line for line in run.stderr.splitlines())


def test_soak_compare_in_another_unit_and_for_unitless_logs(tmp_path: Path) -> None:
    paths = files(tmp_path, replicas_1=REPLICAS_1)
    run = run_soak("compare", "--latencyUnit", "us", "--assumeUnit", "us", paths[0], str(GOLDEN / "100qps-us.log"))
    assert run.returncode == 0, run.stderr
    assert "p50 (us)                     2000            468   -76.6%" in run.stdout
    assert "mean (us)                2500.000       ~526.994   -78.9%" in run.stdout


@pytest.mark.parametrize(("arguments", "message"), [
    (["/no/such.json", "{other}"], "soak: /no/such.json: no such file"),
    (["{dir}", "{other}"], "soak: {dir}: cannot read: Is a directory"),
    (["{empty}", "{other}"], "soak: {empty}: no soak or slow_cooker output in it (no interval lines, no JSON summary)"),
    (["{junk}", "{other}"], "soak: {junk}: no soak or slow_cooker output in it (no interval lines, no JSON summary)"),
    (["{other}"], "soak: compare needs two files or more: the first is the baseline"),
    ([], "soak: the following arguments are required: FILE (see soak compare --help)"),
])
def test_soak_compare_says_what_is_wrong_in_one_line(tmp_path: Path, arguments: list[str], message: str) -> None:
    (tmp_path / "empty.log").write_text("")
    (tmp_path / "junk.log").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00garbage")
    names = {"dir": str(tmp_path), "empty": str(tmp_path / "empty.log"), "junk": str(tmp_path / "junk.log"),
             "other": str(GOLDEN / "100qps-ms.log")}
    run = run_soak("compare", *(a.format(**names) for a in arguments))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [message.format(**names)]
    assert run.stdout == ""


def test_soak_compare_refuses_an_unknown_unit_in_one_line() -> None:
    run = run_soak("compare", "--latencyUnit", "s", str(GOLDEN / "100qps-ms.log"), str(GOLDEN / "100qps-us.log"))
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.startswith("soak: argument --latencyUnit: invalid choice: 's' (choose from ")


def test_a_bench_log_compares_without_a_note_unless_something_unexpected_is_in_it(tmp_path: Path) -> None:
    """ab's report in a saved `soak bench` log is expected (its figures are in the summary): no
    note for it; a line that is neither ab's nor soak's is still named on stderr."""
    bench = kubectl_logs("demo", "--mode", "bench", "--totalRequests", "300")
    assert "Requests per second:" in bench and "Completed 300 requests" in bench
    lines = bench.splitlines(keepends=True)
    odd = "".join(lines[:3] + ["something else entirely\n"] + lines[3:])
    paths = files(tmp_path, bench_log=bench, odd_log=odd)
    clean = run_soak("compare", paths[0], paths[0])
    assert clean.returncode == 0 and clean.stderr == ""
    noted = run_soak("compare", paths[0], paths[1])
    assert noted.returncode == 0
    assert noted.stderr == (f"{paths[1]}: line 4: not soak or slow_cooker output, skipped: "
                            "'something else entirely'\n")
