"""Write the seed corpus of the response parser's fuzzer (tests/fuzz/corpus/response/).

    python tests/fuzz/seed_corpus.py

Seeds are the differential test's own responses (tests/support/responses.py: every framing,
every refusal) and what each path of the fault server (tests/support/faultserver.py) really
sends, each in fuzz_response.c's input format: a control byte (HEAD, close, small bound), a
byte that picks the cuts into reads, then the bytes. The seeds written here are named seed-*;
the other files are left alone: found-* (what long fuzz runs reached, merged with libFuzzer's
-merge=1 so that each adds coverage) and regression-* (inputs that once crashed it).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from tests.support.capture import capture  # noqa: E402
from tests.support.faultserver import FaultServer  # noqa: E402
from tests.support.responses import HOSTILE, VALID  # noqa: E402

CORPUS = REPO / "tests" / "fuzz" / "corpus" / "response"
HEAD, CLOSE, SMALL_BOUND = 1, 2, 4  # fuzz_response.c's control bits
MOST = 4096  # bytes of a seed at most: longer bodies teach the fuzzer nothing more

# The fault server's paths, as the differential test replays them (tests/integration/test_native_response.py).
FAULT_PATHS = ("/ok", "/status/204", "/status/304", "/status/404", "/status/100", "/status/101", "/status/0",
               "/reset-mid-body", "/close-mid-body", "/garbage", "/big/5000", "/chunked", "/varying",
               "/interim/100", "/interim/102-close", "/switch", "/endless-headers", "/endless-chunk-line",
               "/bad-chunking", "/trickle/5/1", "/gzip", "/gzip-lie", "/until-close", "/nosuch")


def seed(name: str, control: int, cuts: int, data: bytes) -> None:
    (CORPUS / f"seed-{name}").write_bytes(bytes([control, cuts]) + data[:MOST])


def main() -> None:
    CORPUS.mkdir(parents=True, exist_ok=True)
    for old in CORPUS.glob("seed-*"):
        old.unlink()
    for i, (name, data) in enumerate({**VALID, **HOSTILE}.items()):
        seed(name, CLOSE, i % 7, data)
        seed(f"{name}-head", HEAD, 0, data)
    seed("endless-headers-small-bound", SMALL_BOUND, 2, VALID["nginx"])
    seed("chunk-lines-small-bound", SMALL_BOUND, 3, VALID["chunked-ext"] + b"0" * 200)
    server = FaultServer().start()
    try:
        for path in FAULT_PATHS:
            for method in ("GET", "HEAD") if path in ("/ok", "/chunked", "/interim/100") else ("GET",):
                got = capture(server.port, path, method, limit=MOST)  # each of these paths closes
                name = "fault" + path.replace("/", "-") + ("-head" if method == "HEAD" else "")
                control = (HEAD if method == "HEAD" else 0) | (CLOSE if got.ending == "eof" else 0)
                seed(name, control | (SMALL_BOUND if path.startswith("/endless") else 0), 5, b"".join(got.chunks))
    finally:
        server.stop()
    print(f"{len(list(CORPUS.iterdir()))} files in {CORPUS.relative_to(REPO)}")


if __name__ == "__main__":
    main()
