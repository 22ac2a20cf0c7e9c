"""The native response parser against hostile input: libFuzzer, AddressSanitizer and UBSan.

tests/fuzz/fuzz_response.c feeds each input cut into reads (the fuzzer chooses where),
checks every promise of the parser after every read (offsets within what was fed, body
within the wire, nothing taken or changed after an ending, the same answer however the
bytes were cut) and crashes when one breaks; the sanitizers crash it on any read or
write out of bounds and on undefined behaviour. The committed corpus (tests/fuzz/corpus/
response/: every framing, every refusal, every fault-server answer, and each crash the
fuzzer ever found) must replay clean, and a bounded run from it must find nothing.

Fuzzing longer, and making the corpus: docs/development.md.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.programs import program

NATIVE = REPO / "runner" / "load" / "native"
FUZZ = REPO / "tests" / "fuzz"
CORPUS = FUZZ / "corpus" / "response"
SECONDS = 45  # of fuzzing in the suite; a longer run is a developer's (docs/development.md)
CLANG_HINT = "apt-get install -y clang libclang-rt-14-dev (libFuzzer and the sanitizers' runtime, as .ci/run does)"


def build_harness(into: Path, *defines: str) -> Path:
    """fuzz_response.c and the parser, built with libFuzzer, ASan and UBSan (any UB aborts)."""
    clang = program("clang", CLANG_HINT)
    built = into / "fuzz_response"
    done = subprocess.run(
        [clang, "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
         "-Wall", "-Wextra", "-Werror", *defines, "-I", str(NATIVE), str(FUZZ / "fuzz_response.c"),
         str(NATIVE / "response.c"), "-o", str(built)],
        capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"the fuzz harness did not build ({CLANG_HINT}):\n{done.stderr[-3000:]}")
    return built


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harness(tmp_path_factory.mktemp("fuzz"))


def fuzz(harness: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the harness at the lowest priority: the machine is shared, the answer does not depend on speed."""
    return subprocess.run([str(harness), *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=lambda: os.nice(19))


def replay(harness: Path, tmp_path: Path) -> None:
    seeds = sorted(CORPUS.iterdir())
    assert len(seeds) > 300
    done = fuzz(harness, "-runs=0", f"-artifact_prefix={tmp_path}/", str(CORPUS), timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "INITED" in done.stderr or "Done" in done.stderr, done.stderr[-2000:]


def test_the_corpus_replays_clean(harness: Path, tmp_path: Path) -> None:
    replay(harness, tmp_path)


def test_the_corpus_replays_clean_without_sse2(tmp_path: Path) -> None:
    """The scans any machine has (-DSOAK_PORTABLE), as on one without SSE2, keep every promise too."""
    replay(build_harness(tmp_path, "-DSOAK_PORTABLE"), tmp_path)


def test_a_bounded_fuzz_run_finds_nothing(harness: Path, tmp_path: Path) -> None:
    found = tmp_path / "new"  # what the run adds to the corpus stays out of the tree
    found.mkdir()
    done = fuzz(harness, f"-max_total_time={SECONDS}", "-rss_limit_mb=2048", "-timeout=10", "-print_final_stats=1",
                f"-dict={FUZZ / 'http.dict'}", f"-artifact_prefix={tmp_path}/", str(found), str(CORPUS),
                timeout=SECONDS * 10 + 300)
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "leak-", "timeout-", "oom-"))]
    assert done.returncode == 0 and not crashes, f"{crashes}:\n{done.stderr[-5000:]}"
    assert "stat::number_of_executed_units" in done.stderr
