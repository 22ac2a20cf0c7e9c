"""A real Prometheus on a free loopback port, for the tests that query one.

Debian's `prometheus` package (README's test command installs it); the binary is started
here with a temporary config and storage directory, never the system service. It scrapes
the given targets every second, with honor_labels (as a Pushgateway must be scraped), and
evaluates the given rule files every second. Queries go through its HTTP API.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tests.conftest import free_port
from tests.support import reaper
from tests.support.programs import program

BINARY = "/usr/bin/prometheus"
T = TypeVar("T")


def binary() -> str:
    return program("prometheus", "apt-get install -y prometheus (README's test command does)", BINARY)


class QueryError(Exception):
    """Prometheus refused a query (a parse or evaluation error), with its own words."""


class Prometheus:
    """The Prometheus process, listening on 127.0.0.1:`port`, until stop()."""

    def __init__(self, directory: Path, targets: list[str], rule_files: Sequence[Path] = (),
                 flags: Sequence[str] = ()) -> None:
        """`flags`: more of Prometheus' own, such as --web.enable-remote-write-receiver (then `write_url`
        receives remote writes) and --enable-feature=native-histograms."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.write_url = f"{self.url}/api/v1/write"
        config = {
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(path) for path in rule_files],
            "scrape_configs": [{"job_name": "scraped", "honor_labels": True,
                                "static_configs": [{"targets": targets}]}],
        }
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = directory / "prometheus.log"
        with self.log.open("wb") as log:
            self.process = reaper.spawn(
                [binary(), f"--config.file={directory / 'prometheus.yml'}", f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", "--log.level=warn", *flags],
                "prometheus", stdout=log, stderr=subprocess.STDOUT,
            )
        try:
            self.wait_for(lambda: self._get("/-/ready", raw=True), 30, "Prometheus ready")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        reaper.stop(self.process, timeout=15)

    def _get(self, path: str, params: dict[str, str] | None = None, raw: bool = False) -> Any:
        url = f"{self.url}{path}" + (f"?{urllib.parse.urlencode(params, doseq=True)}" if params else "")
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                body = response.read().decode()
        except urllib.error.HTTPError as e:  # 400 and 422: the query's own fault, with Prometheus' words
            body = e.read().decode()
            if raw:
                return None
            raise QueryError(f"{json.loads(body).get('error', body)}: {params}") from None
        except OSError:
            if raw:
                return None
            raise
        if raw:
            return body
        answer = json.loads(body)
        assert answer["status"] == "success", answer
        return answer["data"]

    def query(self, expr: str, at: float) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query at time `at`: each series' labels (sorted pairs) -> its value (NaN kept)."""
        data = self._get("/api/v1/query", {"query": expr, "time": f"{at:.3f}"})
        if data["resultType"] == "scalar":
            return {(): float(data["result"][1])}
        assert data["resultType"] == "vector", data
        return {tuple(sorted(s["metric"].items())): float(s["value"][1]) for s in data["result"]}

    def samples(self, selector: str, at: float, window: str = "1h") -> dict[tuple[tuple[str, str], ...], list]:
        """Every raw sample of the series `selector` picks within `window` before `at`: each series'
        labels -> its [time, value] pairs, or [time, histogram] pairs for native histograms."""
        data = self._get("/api/v1/query", {"query": f"{selector}[{window}]", "time": f"{at:.3f}"})
        assert data["resultType"] == "matrix", data
        return {tuple(sorted(s["metric"].items())): s.get("values", []) + s.get("histograms", [])
                for s in data["result"]}

    def series_count(self, name: str) -> int:
        return len(self._get("/api/v1/series", {"match[]": name}))

    def label_values(self, label: str, match: str) -> list[str]:
        return self._get(f"/api/v1/label/{label}/values", {"match[]": match})

    def rules(self) -> list[dict]:
        return [rule for group in self._get("/api/v1/rules")["groups"] for rule in group["rules"]]

    def alerts(self) -> list[dict]:
        return self._get("/api/v1/alerts")["alerts"]

    def now(self) -> float:
        """Prometheus' own time (time() evaluated now)."""
        (value,) = self._get("/api/v1/query", {"query": "time()"})["result"][1:]
        return float(value)

    def wait_for(self, check: Callable[[], T], timeout: float, what: str) -> T:
        """Poll `check` until it returns something true; bounded in time, not in the machine's speed."""
        deadline = time.monotonic() + timeout
        while True:
            found = check()
            if found:
                return found
            if time.monotonic() > deadline:
                log = self.log.read_text()[-2000:] if self.log.exists() else ""
                raise AssertionError(f"{what}: not within {timeout}s\n{log}")
            time.sleep(0.2)


Past = tuple[str, dict[str, str], Iterable[tuple[float, float]]]  # a series: name, labels, (time, value)s


def backfill(directory: Path, series: Iterable[Past]) -> None:
    """Series of the past, written into the storage of the Prometheus about to start in `directory`
    (promtool tsdb create-blocks-from openmetrics): as if scraped, or recorded by rules, back then.
    Prometheus loads the blocks when it starts; they must end before its first own sample."""
    families: dict[str, list[str]] = {}
    for name, labels, samples in series:
        matchers = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
        families.setdefault(name, []).extend(f"{name}{{{matchers}}} {value!r} {at:.3f}" for at, value in sorted(samples))
    text = "".join(f"# TYPE {name} gauge\n" + "\n".join(lines) + "\n" for name, lines in families.items()) + "# EOF\n"
    (directory / "backfill.om").write_text(text)
    promtool = program("promtool", "apt-get install -y prometheus (README's test command does)")
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", "--quiet",
                           str(directory / "backfill.om"), str(directory / "data")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr

