"""The native engine's connection state machine against a hostile server, under ASan and UBSan.

Every byte from a server is hostile: tests/support/hostileserver.py answers each request with
a generated response, often mutated or cut, in random pieces, then keeps, closes or resets
the connection. The engine, built from the tree with AddressSanitizer and UBSan (any report
aborts it), runs in a child Python against it. Whatever came, every send is counted once
(requests = totalRequests, each a response or a failure of a kind the Python transport
could name), the run ends, and nothing was read or written out of bounds. The seeds are
fixed so a failure can be told again; each run is bounded by its count and its timeout.

The same server behind TLS (tests/support/tlsfaults.py's TlsFront: each piece it sends a record
of its own, its close or reset the TCP connection's, without close_notify) runs the engine's
TLS path the same way: every send counted once, nothing out of bounds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.certs import Pki
from tests.support.hostileserver import HostileServer
from tests.support.nativerun import build_engine
from tests.support.programs import program
from tests.support.tlsfaults import TlsFront

REQUESTS = 300
SANITIZE = ("-O1", "-g", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=all")

CHILD = """
import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("runner.load.native._engine", sys.argv[2])
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
sys.modules["runner.load.native._engine"] = module
from runner.config.targets import Targets
from tests.support.nativerun import Plan, run_native
found = {}
url, ca = sys.argv[3], sys.argv[5]
for model in ("closed", "open", "backends"):  # backends: closed, a backendHeader read, two URLs by weight
    urls = Targets((url, url + "b"), (2, 1)) if model == "backends" else [url]
    ran = run_native(Plan(urls, qps=1000, clients=4, seconds=None, total_requests=int(sys.argv[4]),
                          timeout_s=1.0, open_model=model == "open", max_in_flight=6,
                          backend_header="X-Soak-Backend" if model == "backends" else "", ca_bundle=ca),
                     timeout_s=300)
    found[model] = {"requests": ran.requests, "responses": ran.run.responses, "errors": dict(ran.run.errors),
                    "statuses": {str(k): v for k, v in ran.run.statuses.items()}}
print(json.dumps(found))
"""


@pytest.fixture(scope="module")
def sanitized_engine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_engine(tmp_path_factory.mktemp("native-asan"), SANITIZE)


@pytest.mark.parametrize("tls", [False, True], ids=["http", "https"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_whatever_a_hostile_server_sends_every_send_is_counted_once(sanitized_engine: Path, seed: int, tls: bool,
                                                                    pki: Pki) -> None:
    gcc = program("gcc", "apt-get install -y gcc")
    asan = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    server = HostileServer(seed).start()
    try:
        with TlsFront(pki, server.port) as front:
            url = f"https://127.0.0.1:{front.port}/" if tls else f"http://127.0.0.1:{server.port}/"
            done = subprocess.run(
                [sys.executable, "-c", CHILD, str(REPO), str(sanitized_engine), url, str(REQUESTS), str(pki.ca)],
                capture_output=True, text=True, timeout=600,
                env={**os.environ, "LD_PRELOAD": asan, "PYTHONMALLOC": "malloc",
                     "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1", "UBSAN_OPTIONS": "print_stacktrace=1"})
    finally:
        server.stop()
    assert done.returncode == 0, done.stderr[-6000:]
    assert "AddressSanitizer" not in done.stderr and "runtime error" not in done.stderr, done.stderr[-6000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for model, counts in found.items():
        assert counts["requests"] == REQUESTS, (model, counts)
        assert counts["responses"] + sum(counts["errors"].values()) == REQUESTS, (model, counts)
        assert set(counts["errors"]) <= {"closed", "protocol", "reset", "timeout"}, (model, counts)
        assert counts["responses"] > 0 and Counter(counts["errors"]).total() > 0, (model, counts)
