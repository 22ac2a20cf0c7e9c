"""`soak report`: the page a person opens, opened in a real browser (headless Chromium).

Runs are real (the CLI against nginx, stdout and stderr in one stream as `kubectl logs` gives
them); the page is rendered to PNG at a desktop's and a phone's width and printed to PDF, its
DOM read back, and every network connection the browser tried is recorded by a loopback proxy
(tests/support/chromium.py): the page must make none. A control page that does fetch shows
the recorder sees it.
"""

from __future__ import annotations

import os
import subprocess
from html.parser import HTMLParser
from pathlib import Path

import pytest
from junitparser import JUnitXml

from runner.core.columns import LINE
from runner.core.errors import EXIT_USAGE
from tests.conftest import REPO, Nginx, parse_interval, run_soak, soak_command
from tests.support.chromium import Connections, chromium, host_of, png_size
from tests.unit.test_junit import schema

DESKTOP, PHONE = (1280, 2400), (390, 844)


def kubectl_log(path: Path, *args: str) -> Path:
    """The CLI's stdout and stderr in one file, as `kubectl logs` shows a pod; any exit code."""
    with path.open("w") as out:
        subprocess.run(soak_command(*args), stdout=out, stderr=subprocess.STDOUT, text=True, timeout=120, cwd=REPO,
                       env={**os.environ, "TZ": "UTC"}, check=False)
    return path


@pytest.fixture(scope="module")
def sixty(nginx: Nginx, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 intervals of 100 ms to nginx's page and its /fail (a 503), with a rule broken and two kept."""
    directory = tmp_path_factory.mktemp("sixty")
    return kubectl_log(directory / "soak-60.log", "--qps", "100", "--concurrency", "4", "--interval", "100ms",
                       "--iterations", "60", "--thresholds", "p99 < 10s, p99 < 1us",
                       "--intervalThresholds", "goal% >= 10", nginx.url, nginx.url + "fail")


class Elements(HTMLParser):
    """Every element of a document with its attributes, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def assert_nothing_runs_or_loads(html: str) -> Elements:
    """No script, no handler, no frame or embed, no link or source to fetch anything from."""
    found = Elements(html)
    names = {tag for tag, _ in found.tags}
    assert not names & {"script", "iframe", "frame", "object", "embed", "img", "link", "base", "image", "use",
                        "audio", "video", "source", "form"}, names
    for tag, attributes in found.tags:
        assert not [a for a in attributes if a.startswith("on") or a in ("src", "href", "xlink:href", "srcset",
                                                                          "action", "formaction", "background")], \
            (tag, attributes)
    return found


def render(page: Path, tmp_path: Path) -> tuple[str, list[bytes]]:
    """The page's DOM as Chromium built it, a desktop and a phone screenshot, a PDF print; and the
    connections it tried meanwhile."""
    with Connections() as connections:
        dom = chromium(page, tmp_path / "profile", connections.port, "--dump-dom").stdout
        for name, (width, height) in (("desktop", DESKTOP), ("phone", PHONE)):
            shot = tmp_path / f"{name}.png"
            chromium(page, tmp_path / "profile", connections.port, f"--window-size={width},{height}",
                     f"--screenshot={shot}")
            assert png_size(shot) == (width, height)
        pdf = tmp_path / "print.pdf"
        chromium(page, tmp_path / "profile", connections.port, "--no-pdf-header-footer", f"--print-to-pdf={pdf}")
        assert pdf.read_bytes()[:5] == b"%PDF-" and pdf.stat().st_size > 20_000
    return dom, connections.from_the_page


def test_a_60_interval_run_renders_with_no_network_on_a_desktop_a_phone_and_paper(sixty: Path, tmp_path: Path) -> None:
    page, junit = tmp_path / "report.html", tmp_path / "report.xml"
    done = run_soak("report", str(sixty), "-o", str(page), "--junit", str(junit))
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    html = page.read_text()
    assert_nothing_runs_or_loads(html)
    dom, seen = render(page, tmp_path)
    assert seen == []
    text = " ".join(" ".join(Elements(dom).text).split())
    # The verdict first: before the run's facts and its charts.
    assert text.index("Thresholds broken exit code 3") < text.index("The run") < text.index("Intervals")
    assert "BROKEN run p99 < 1us measured" in text and "ok run p99 < 10s measured" in text
    assert "intervals 60 " in text
    for section in ("Latency per interval (log scale)", "Rate (req/s)", "goal% per interval",
                    "Errors per interval (bad + failed)", "Latency by percentile", "Per URL",
                    "Where the time went, per phase", "Responses and failures"):
        assert section in text, section
    assert "status 503" in text and "status 200" in text
    latency_chart = dom[dom.index("Latency per interval"):dom.index("Rate (req/s)")]
    lines = [parse_interval(line) for line in sixty.read_text().splitlines() if LINE.match(line)]
    answered = sum(1 for line in lines if line.good + line.bad)  # on a busy machine an interval may get none
    assert len(lines) == 60 and answered > 0
    assert latency_chart.count("<circle") == answered * 5  # p50, p95, p99, p999, max at each answered interval
    schema().validate(str(junit))
    (suite,) = JUnitXml.fromfile(str(junit))
    assert [case.name for case in suite] == ["run p99 < 10s", "run p99 < 1us", "interval goal% >= 10"]


def test_the_recorder_sees_a_page_that_fetches(tmp_path: Path) -> None:
    """The control: a page with a CDN's script, a font and an image tries to fetch them, and the
    proxy records each try, so an empty record means the page fetched nothing."""
    page = tmp_path / "fetches.html"
    page.write_text('<!DOCTYPE html><html><head><link rel="stylesheet" href="https://cdn.example.com/x.css">'
                    '<script src="http://cdn.example.com/x.js"></script></head>'
                    '<body><img src="http://203.0.113.9/x.png">hello</body></html>')
    with Connections() as connections:
        chromium(page, tmp_path / "profile", connections.port, "--dump-dom")
    assert {host_of(first) for first in connections.from_the_page} == {"cdn.example.com", "203.0.113.9"}, \
        connections.seen


def test_a_range_of_seven_runs_shows_the_trend(nginx: Nginx, tmp_path: Path) -> None:
    logs = [kubectl_log(tmp_path / f"run-{i}.log", "--qps", "50", "--concurrency", "2", "--interval", "100ms",
                        "--iterations", "5", "--thresholds", "p99 < 10s", nginx.url) for i in range(7)]
    page, junit = tmp_path / "range.html", tmp_path / "range.xml"
    done = run_soak("report", *map(str, reversed(logs)), "-o", str(page), "--junit", str(junit))
    assert done.returncode == 0, done.stderr
    assert_nothing_runs_or_loads(page.read_text())
    dom, seen = render(page, tmp_path)
    assert seen == []
    text = " ".join(" ".join(Elements(dom).text).split())
    assert "7 runs: 7 passed" in text and "p99 per run (log scale)" in text and "goal% per run" in text
    # Oldest first, whatever order they were given in.
    assert [text.index(f"Run {i}: {log}") for i, log in enumerate(map(str, logs), 1)] == \
        sorted(text.index(f"Run {i}: {log}") for i, log in enumerate(map(str, logs), 1))
    trend = dom[dom.index("p99 per run"):dom.index("goal% per run")]
    assert trend.count("<circle") == 7
    schema().validate(str(junit))
    suites = list(JUnitXml.fromfile(str(junit)))
    assert [s.name for s in suites] == [str(log) for log in logs]


CRAFTED = """\
# sending 100 GET req/s with concurrency=5 to http://x/<script>alert(1)</script> ...
2026-12-01T10:00:01Z    0    100/0/0 100 100% 1s   0 [  0   0   2    2 ]    2      0 +
soak: <img src=http://127.0.0.1:9/x onerror=alert(2)>
2026-12-01T10:00:02Z    1    100/0/0 100 100% 1s   0 [  0   0   0    0 ]    0      0
{
  "p50": 0.1, "p99": 0.5, "latencyUnit": "ms", "requests": 200, "good": 200, "bad": 0, "failed": 0,
  "start": "<script>alert(3)</script>",
  "stopReason": "\\"><svg onload=alert(4)>",
  "statusCodes": {"<b>200</b>": 200},
  "errors": {"</style><script>alert(5)</script>": 1},
  "backends": {"<iframe src=https://cdn.example.com/>": 3},
  "perUrl": [{"url": "<a href=https://cdn.example.com/>x</a>", "requests": 1}],
  "phases": {"<script>": {"count": 1, "min": 0.1}},
  "failedWorkers": {"1": "<link rel=stylesheet href=https://cdn.example.com/x.css>"},
  "thresholds": {"passed": false, "rules": [{"rule": "<script>alert(6)</script>", "scope": "run", "ok": false},
                                            {"rule": "p99 < 1ms", "scope": "run", "ok": false, "measured": 5,
                                             "unit": "ms", "inconclusive": false}]}
}
"""


def test_a_crafted_log_injects_nothing(tmp_path: Path) -> None:
    """Every text of a log is anyone's: markup in any of them is shown as text, never run or fetched."""
    log = tmp_path / "<script>alert(0)<\\script>.log"
    log.write_text(CRAFTED)
    page = tmp_path / "crafted.html"
    done = run_soak("report", str(log), "-o", str(page), "--junit", str(tmp_path / "crafted.xml"))
    assert done.returncode == 0, done.stderr
    assert_nothing_runs_or_loads(page.read_text())
    with Connections() as connections:
        dom = chromium(page, tmp_path / "profile", connections.port, "--dump-dom").stdout
    assert connections.from_the_page == []
    found = assert_nothing_runs_or_loads(dom)
    text = "".join(found.text)
    for shown in ("<script>alert(3)</script>", '"><svg onload=alert(4)>', "</style><script>alert(5)</script>",
                  "<iframe src=https://cdn.example.com/>", "<script>alert(6)</script>"):
        assert shown in text, shown
    schema().validate(str(tmp_path / "crafted.xml"))


@pytest.mark.parametrize(("make", "said"), [
    (lambda d: d / "missing.log", "soak: {missing}: no such file\n"),
    (lambda d: (d / "noise.log", (d / "noise.log").write_bytes(bytes(range(256)) * 8))[0],
     "soak: {noise}: no soak or slow_cooker output in it (no interval lines, no JSON summary)\n"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, make: object, said: str) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    done = run_soak("report", str(path), "-o", str(tmp_path / "out.html"))
    assert (done.returncode, done.stderr) == (EXIT_USAGE, said.format(missing=path, noise=path))
    assert not (tmp_path / "out.html").exists() or (tmp_path / "out.html").read_text() == ""


def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(sixty: Path, tmp_path: Path) -> None:
    out = tmp_path / "no" / "such" / "report.html"
    done = run_soak("report", str(sixty), "-o", str(out))
    assert (done.returncode, done.stderr) == (EXIT_USAGE, f"soak: --output: {out}: No such file or directory\n")
    done = run_soak("report", "-", "-", "-o", str(tmp_path / "x.html"))
    assert (done.returncode, done.stderr) == (EXIT_USAGE, "soak: report: stdin (-) can be read only once\n")
