"""A real Prometheus Pushgateway on a free loopback port, for the tests that push to one.

Debian's prometheus-pushgateway (README's test command installs it); the binary is started
here with its metrics kept in memory, never the system service. What was pushed is read
back from its own /metrics, as Prometheus would scrape it.
"""

from __future__ import annotations

import subprocess
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import free_port, wait_for_port
from tests.support import reaper
from tests.support.programs import program

BINARY = "/usr/bin/prometheus-pushgateway"

Samples = dict[str, dict[tuple[tuple[str, str], ...], float]]  # name -> sorted labels -> value


def binary() -> str:
    return program("prometheus-pushgateway", "apt-get install -y prometheus-pushgateway (README's test command does)",
                   BINARY)


class Pushgateway:
    """The Pushgateway process, listening on 127.0.0.1:`port`, until stop()."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = reaper.spawn(
            [binary(), f"--web.listen-address=127.0.0.1:{self.port}", "--persistence.file=", "--log.level=warn"],
            "pushgateway", stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )
        try:
            wait_for_port(self.port)
        except RuntimeError:
            self.stop()
            raise

    def stop(self) -> None:
        reaper.stop(self.process)

    def samples(self) -> Samples:
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=10) as response:
            text = response.read().decode()
        found: Samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                found.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
        return found

    def group(self, job: str, pod_index: str = "0") -> Samples:
        """What the group (job, pod_index) holds, each sample's labels without the grouping key."""
        group: Samples = {}
        for name, series in self.samples().items():
            for labels, value in series.items():
                found = dict(labels)
                if found.get("job") == job and found.get("pod_index") == pod_index:
                    rest = tuple((k, v) for k, v in labels if k not in ("job", "pod_index", "instance"))
                    group.setdefault(name, {})[rest] = value
        return group
