"""The termination message: made from the exit code and the run's last lines alone, and bounded."""

from __future__ import annotations

from runner.commands.termination import MESSAGE_BYTES, termination_message

BROKEN = ["threshold run errors% <= 1: 100% BROKEN", "threshold run goal% >= 95: 0% BROKEN"]


def test_a_passing_run_says_passed_and_how_many_rules_held() -> None:
    assert termination_message(0, ["2 of 2 thresholds kept"]) == "passed: 2 of 2 thresholds kept\n"
    assert termination_message(0, []) == "passed: no thresholds set\n"


def test_a_broken_run_names_its_code_then_each_broken_rule() -> None:
    assert termination_message(3, ["2 of 2 thresholds broken", *BROKEN]) == (
        "exit code 3: 2 of 2 thresholds broken\n" + "\n".join(BROKEN) + "\n")


def test_any_other_code_is_said_with_whatever_lines_came_with_it() -> None:
    """Codes this module knows nothing of (a worker lost, a run cut short by a signal, ...) still
    read as what they are: the code, then the lines the run's end gave."""
    assert termination_message(4, []) == "exit code 4\n"
    assert termination_message(7, ["stopped by SIGTERM before its planned end"]) == (
        "exit code 7: stopped by SIGTERM before its planned end\n")
    assert termination_message(5, ["", "2 of 2 thresholds kept"]) == "exit code 5: 2 of 2 thresholds kept\n"


def test_many_lines_are_cut_to_whole_lines_and_say_how_many_more() -> None:
    lines = ["300 of 300 thresholds broken", *(f"threshold run p99 < {n}ms: 12.3ms BROKEN" for n in range(300))]
    message = termination_message(3, lines)
    assert len(message.encode()) <= MESSAGE_BYTES < 4096 // 2
    shown = message.splitlines()
    assert shown[0] == "exit code 3: 300 of 300 thresholds broken"
    kept = shown[1:-1]
    assert kept == lines[1:len(kept) + 1] and len(kept) > 10
    assert shown[-1] == f"... and {300 - len(kept)} more lines in the log"


def test_every_bound_holds_whatever_the_lines() -> None:
    for limit in (64, 100, 1024):
        for lines in (["x" * 5000], ["é" * 3000, "b"], ["a"] * 500, ["ok", "€" * 40, "€" * 40, "z"]):
            message = termination_message(3, lines, limit)
            assert len(message.encode()) <= limit, (limit, lines[0][:5])
            assert message.endswith("\n") and message.startswith("exit code 3: ")
            message.encode().decode()  # never a character cut in half


def test_a_line_that_fits_exactly_is_kept_whole() -> None:
    head = "exit code 3: a"
    line = "b" * (64 - len(head) - 2)  # head, newline, line, final newline: 64 bytes
    assert termination_message(3, ["a", line], 64) == f"{head}\n{line}\n"
    assert termination_message(3, ["a", line + "b"], 64) == f"{head}\n... and 1 more line in the log\n"
