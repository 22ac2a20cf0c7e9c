"""README and docs/ stay true: links resolve, tables are the code's, the quick start is what CI runs.

Run `python tests/integration/test_docs.py` to rewrite docs/configuration.md's settings table from the schema.
"""

from __future__ import annotations

import itertools
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runner.config.schema import schema, settings_names  # noqa: E402
from runner.core import errors  # noqa: E402
from runner.core.redact import SECRET_WORDS  # noqa: E402
from runner.load.result import ErrorKind  # noqa: E402
from runner.report.clientnotes import INTERVAL_NOTE, NOTE_PREFIXES  # noqa: E402
from runner.report.slowcooker import ChangeWindow  # noqa: E402
from runner.run.demo_target import start_target, stop_target  # noqa: E402
from tests.conftest import parse_interval  # noqa: E402
from tests.support.httpx_differs import HTTPX_DIFFERS  # noqa: E402

README = REPO / "README.md"
DOCS = REPO / "docs"
CONFIGURATION = DOCS / "configuration.md"
OUTPUT = DOCS / "output.md"
TABLE = re.compile(r"(<!-- settings-table:[^\n]*-->\n)(.*?)(<!-- end settings-table -->)", re.S)


# --- the settings table ----------------------------------------------------------------------


def type_text(spec: dict[str, Any]) -> str:
    """A setting's type and range in words, from its schema."""
    if "enum" in spec:
        return "one of " + ", ".join(f"`{v}`" for v in spec["enum"])
    if "anyOf" in spec:
        return " or ".join(branch["type"] for branch in spec["anyOf"])
    if spec.get("format") == "positive-duration":
        low, high = spec["x-durationRange"]
        return f"duration, {low} to {high}"
    if spec.get("format") == "duration":  # 0s for none
        low, high = spec["x-durationRange"]
        return f"duration, 0s or {low} to {high}"
    bounds = [
        f"{sign} {spec[key]}"
        for key, sign in (("exclusiveMinimum", ">"), ("minimum", ">="), ("exclusiveMaximum", "<"), ("maximum", "<="))
        if key in spec
    ]
    if "maxLength" in spec:
        bounds.append(f"at most {spec['maxLength']} characters")
    return ", ".join([spec["type"], *bounds])


def default_text(spec: dict[str, Any]) -> str:
    if "default" not in spec:
        return "none"
    value = spec["default"]
    return f"`{json.dumps(value) if value in ('', {}) or isinstance(value, bool) else value}`"


def settings_table() -> str:
    props = schema()["properties"]
    rows = ["| setting | type | default | meaning |", "|---|---|---|---|"]
    for name in settings_names():
        spec = props[name]
        rows.append(f"| `{name}` | {type_text(spec)} | {default_text(spec)} | {spec['description']} |")
    return "\n".join(rows) + "\n"


def test_settings_table_is_the_schemas() -> None:
    found = TABLE.search(CONFIGURATION.read_text())
    assert found, "docs/configuration.md has no settings table markers"
    assert found.group(2) == settings_table(), "the settings table is stale: run python tests/integration/test_docs.py"


# --- README's quick start --------------------------------------------------------------------


def quickstart() -> list[str]:
    block = README.read_text().split("<!-- quickstart", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def test_quick_start_is_two_commands_a_soak_and_the_tests() -> None:
    soak, tests = quickstart()
    assert soak == "pip install . && soak demo"
    assert tests.endswith(" && tests/run-all")
    run_all = (REPO / "tests" / "run-all").read_text()
    assert "python -m tests.checks" in run_all and "python -m pytest -n" in run_all


def test_quick_start_says_before_its_block_that_the_second_line_is_the_test_suite() -> None:
    """Issue 32: a new user took the second line for set-up and ran the contributors' whole suite.
    The text just above the block says what it is, what it installs and how long it takes."""
    above = " ".join(README.read_text().split("<!-- quickstart", 1)[0].rsplit("## Quick start", 1)[1].split())
    assert "not set-up" in above and "test suite" in above
    assert re.search(r"\b(about \d+|\d+ to \d+) minutes\b", above)
    assert all(program in above for program in ("as root", "nginx", "HAProxy", "Prometheus", "Docker", "compilers"))


def apt_packages(command: str) -> list[str]:
    """The packages an `apt-get install -y ...` in a command names."""
    found = re.search(r"apt-get install -y ((?:[\w.+-]+ ?)+)", command)
    assert found, f"no apt-get install in {command!r}"
    return found.group(1).split()


def test_development_installs_what_the_quick_start_does() -> None:
    development = (DOCS / "development.md").read_text().split("```sh\n", 1)[1].split("```", 1)[0]
    assert apt_packages(development) == apt_packages(quickstart()[1])


def test_ci_runs_the_quick_starts_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "quickstart" in ci and "*tests/run-all*" in ci


def test_readmes_sample_is_what_soak_demo_prints_on_a_busy_machine() -> None:
    """README's `soak demo` sample is real output, notes included: its interval lines parse, each
    `# iter` note is one the runner writes and follows its own interval's line, and the change
    column is what slow_cooker's window, starting as zeros, gives those p99s (so a new user sees
    the notes and the first intervals' `+` before meeting them in a run of their own)."""
    block = README.read_text().split("```\n$ soak demo\n", 1)[1].split("\n{\n", 1)[0]
    start, header, *lines = block.splitlines()
    assert start.startswith("# sending ") and header.split()[1:3] == ["iter", "good/b/f"]
    intervals, notes, window = [], [], ChangeWindow()
    for line in lines:
        if line.startswith("#"):
            assert line.startswith(NOTE_PREFIXES), line
            if line.startswith(INTERVAL_NOTE):
                assert int(line[len(INTERVAL_NOTE):].split(":", 1)[0]) == intervals[-1].iteration, line
            notes.append(line)
        else:
            intervals.append(parse_interval(line))
            assert intervals[-1].change == window.push(intervals[-1].latency("p99")), line
    assert [i.iteration for i in intervals] == list(range(5)) and notes


def test_readme_stays_a_front_door() -> None:
    size = len(README.read_bytes())
    assert size <= 12 * 1024, f"README.md is {size} bytes: move the detail into docs/"


# --- links -----------------------------------------------------------------------------------


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")


def links(page: Path) -> Iterator[tuple[str, Path, str]]:
    """(as written, the file it names, its #anchor or "") for each relative link outside code blocks."""
    for target in LINK.findall(re.sub(r"```.*?```", "", page.read_text(), flags=re.S)):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        yield target, (page.parent / path).resolve() if path else page, anchor


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces to hyphens."""
    found: set[str] = set()
    times: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} (.+)$", re.sub(r"```.*?```", "", page.read_text(), flags=re.S), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        found.add(f"{slug}-{times[slug]}" if slug in times else slug)  # a repeated heading: -1, -2, ...
        times[slug] = times.get(slug, 0) + 1
    return found


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for written, target, anchor in links(page):
        if not target.exists():
            broken.append(f"{written}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{written}: no heading with that anchor in {target.name}")
    assert not broken, f"{page.relative_to(REPO)}: " + "; ".join(broken)


def test_every_page_of_docs_is_on_the_map() -> None:
    index = {target for _, target, _ in links(DOCS / "index.md")}
    assert {page for page in DOCS.glob("*.md") if page.name != "index.md"} <= index


def test_anchors_follow_githubs_rule() -> None:
    """The link check is only as good as its slugs: these are GitHub's for such headings."""
    page = DOCS / "thresholds.md"
    assert "thresholds-pass-or-fail" in anchors(page)
    assert "stopping-early" in anchors(page)


# --- what docs/output.md must name -------------------------------------------------------------


def marked_table(text: str, marker: str) -> list[str]:
    """The first cells of the table that follows `<!-- marker -->`, one per row."""
    after = text.split(f"<!-- {marker} -->\n", 1)[1].lstrip("\n")
    rows = []
    for line in after.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append(line.split("|")[1])
    return rows


def test_every_error_kind_is_documented_in_order() -> None:
    kinds = [re.findall(r"`(\w+)`", cell)[0] for cell in marked_table(OUTPUT.read_text(), "error-kinds")]
    assert kinds == list(ErrorKind)


def test_every_difference_of_httpx_is_documented() -> None:
    """docs/development.md's table is tests/support/httpx_differs.py's, row for row, in order."""
    text = (DOCS / "development.md").read_text()
    assert [cell.strip() for cell in marked_table(text, "httpx-differs")] == list(HTTPX_DIFFERS)


def test_every_exit_code_is_documented() -> None:
    codes = {int(cell) for cell in marked_table(OUTPUT.read_text(), "exit-codes")}
    defined = {value for name, value in vars(errors).items() if name.startswith("EXIT_")}
    assert defined | {130} == codes


def test_the_exit_code_precedence_is_documented_in_its_order() -> None:
    """docs/output.md's table and README's list both give runner.core.errors.PRECEDENCE's order."""
    after = OUTPUT.read_text().split("<!-- exit-code-precedence -->\n", 1)[1].lstrip("\n").splitlines()[2:]
    rows = [line.split("|") for line in itertools.takewhile(lambda line: line.startswith("|"), after)]
    assert [int(row[1]) for row in rows] == list(range(1, len(rows) + 1))
    assert tuple(int(row[2]) for row in rows) == errors.PRECEDENCE
    listed = re.search(r"the one that says most about the service wins \(([\d, ]+);", README.read_text())
    assert listed and tuple(int(code) for code in listed.group(1).split(", ")) == errors.PRECEDENCE


def test_secret_words_are_the_redactors() -> None:
    text = CONFIGURATION.read_text().split("<!-- secret-words -->", 1)[1].split(" (so ", 1)[0]
    assert tuple(re.findall(r"`(\w+)`", text)) == SECRET_WORDS


# Objects whose keys are data (status codes, error kinds, settings, percentages), not names.
OPEN_OBJECTS = {"config", "statusCodes", "errors", "connections", "intervalStats[].errors", "bench.servedWithin",
                "shard.connections", "perUrl[].statusCodes", "perUrl[].errors", "warmup.statusCodes",
                "warmup.errors", "warmup.connections", "backends", "intervalStats[].backends"}
# Objects of same-shaped records: each child is named, its fields are documented once, as `*`.
RECORD_MAPS = {"bench.phases", "phases"}
# The shard record is for `soak merge`: its tallies and histograms are the recorder's own format.
CLOSED_BELOW = {"shard.intervals[].tally", "shard.intervals[].client", "shard.uncorrected", "shard.sendLag",
                "shard.inUnit", "shard.client", "shard.drain", "shard.perUrl", "shard.warmup"}


def key_paths(data: dict[str, Any], prefix: str = "") -> Iterator[str]:
    """Every key of a summary as a path: `rate.target`, `intervalStats[].p99`, `bench.phases.*.min`."""
    for key, value in data.items():
        path = prefix + key
        yield path
        if path in OPEN_OBJECTS or path in CLOSED_BELOW:
            continue
        if isinstance(value, dict):
            if path in RECORD_MAPS:
                for record in value.values():
                    yield from key_paths(record, path + ".*.")
            else:
                yield from key_paths(value, path + ".")
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, dict):
                    yield from key_paths(item, path + "[].")


def documented_keys() -> set[str]:
    """The keys named in docs/output.md's summary tables, each table marked with the object it describes."""
    text = OUTPUT.read_text()
    keys = set()
    for prefix in re.findall(r"<!-- summary-keys(?:: ([^ ]+))? -->", text):
        marker = f"summary-keys: {prefix}" if prefix else "summary-keys"
        for cell in marked_table(text, marker):
            keys |= {f"{prefix}.{key}" if prefix else key for key in re.findall(r"`([^`]+)`", cell)}
    return keys


def summary_of(stdout: str) -> dict[str, Any]:
    """The JSON summary at the end of a run's stdout."""
    summary: dict[str, Any] = json.loads(stdout[stdout.index("\n{\n") + 1:] if not stdout.startswith("{") else stdout)
    return summary


def soak(*arguments: str, stdin: str | None = None, code: int = 0) -> str:
    run = subprocess.run([sys.executable, "-m", "runner", *arguments], capture_output=True, text=True,
                         timeout=60, cwd=REPO, input=stdin)
    assert run.returncode == code, run.stderr
    return run.stdout


@cache
def real_summaries() -> tuple[dict[str, Any], ...]:
    """Summaries of real runs against the demo target, between them holding every optional section:
    an open-model shard with run and interval thresholds, `soak merge` of it, and a bench."""
    records = tempfile.mkdtemp(prefix="soak-records-")  # a store, for the resultsStore key
    shard = soak("demo", "--iterations", "2", "--interval", "200ms", "--loadModel", "open", "--warmup", "200ms",
                 "--thresholds", "p99 < 10s", "--intervalThresholds", "p99 < 10s", "--stopAtBrokenRule",
                 "--shards", "2", "--shard", "0", "--resultsStore", f"file://{records}", "--resultsRun", "docs",
                 "--resultsMergeWait", "0s", "--backendHeader", "Server")  # the demo target's one header that names it
    shutil.rmtree(records)
    merged = soak("merge", "-", stdin=shard, code=errors.EXIT_SHARD_MISSING)  # shard 1 of the 2 is missing
    bench = soak("demo", "--mode", "bench", "--totalRequests", "20")
    child, url = start_target()  # the demo's target, for a run of two weighted URLs and a rule scoped to one
    try:
        per_url = soak("--iterations", "2", "--interval", "200ms", "--thresholds", "p99{url=/} < 10s", "3", url,
                       url + "b")
    finally:
        stop_target(child)
    return summary_of(shard), summary_of(merged), summary_of(bench), summary_of(per_url)


def test_every_key_of_a_real_summary_is_documented() -> None:
    found = {path for summary in real_summaries() for path in key_paths(summary)}
    assert {"uncorrected", "thresholds.rules[].worstInterval", "shard", "shards.missing", "bench.phases.*.hdr",
            "intervalStats[].goalPercent", "sendingSeconds", "perUrl[].p99", "thresholds.rules[].url", "warmup.p99",
            "lastGoodRate", "backends", "intervalStats[].backendsReached", "phases.*.p99", "resultsStore.merged"} <= found, \
        "the runs lack a section they were meant to have"
    missing = sorted(found - documented_keys())
    assert not missing, f"summary keys not documented in docs/output.md: {missing}"


def test_every_documented_key_is_one_the_runner_writes() -> None:
    """No stale key: each documented name is a string the runner's code spells out."""
    source = "\n".join(path.read_text() for path in (REPO / "runner").rglob("*.py"))
    written = set(re.findall(r"""["'](\w+)["']""", source))
    stale = sorted(key for key in documented_keys() if key.rsplit(".", 1)[-1].removesuffix("[]") not in written)
    assert not stale, f"docs/output.md documents keys no code writes: {stale}"


if __name__ == "__main__":
    text = CONFIGURATION.read_text()
    CONFIGURATION.write_text(TABLE.sub(lambda m: m.group(1) + settings_table() + m.group(3), text))
    print("docs/configuration.md settings table rewritten")
