"""The native response parser and TLS read path against hostile input: libFuzzer, ASan and UBSan.

tests/fuzz/fuzz_response.c feeds each input cut into reads (the fuzzer chooses where),
checks every promise of the parser after every read (offsets within what was fed, body
within the wire, nothing taken or changed after an ending, the same answer however the
bytes were cut) and crashes when one breaks; the sanitizers crash it on any read or
write out of bounds and on undefined behaviour. The committed corpus (tests/fuzz/corpus/
response/: every framing, every refusal, every fault-server answer, and each crash the
fuzzer ever found) must replay clean, and a bounded run from it must find nothing.

tests/fuzz/fuzz_body.c does the same for a hashed body (body.c: zlib's inflate within
bodyhash's bounds, a step at a time, as core.c drives it) behind the parser's body sink: the
same hash or failure however the bytes were cut, each step within its bound, and the hash of a
whole gzip body the one zlib makes inflating it at once. Its corpus is tests/fuzz/corpus/body/.
tests/fuzz/fuzz_tls.c does the same for the engine's TLS (runner/load/native/tls.c) with the
parser behind it: a real OpenSSL server in memory whose bytes the fuzzer cuts, delays, flips, adds
to or replaces, renegotiations and close_notify included; its corpus is tests/fuzz/corpus/tls/.

Fuzzing longer, and making the corpus: docs/development.md.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.programs import program
from tests.support.replay import PORTABLE

NATIVE = REPO / "runner" / "load" / "native"
FUZZ = REPO / "tests" / "fuzz"
CORPUS = FUZZ / "corpus" / "response"
BODY_CORPUS = FUZZ / "corpus" / "body"
TLS_CORPUS = FUZZ / "corpus" / "tls"
SECONDS = 45  # of fuzzing in the suite; a longer run is a developer's (docs/development.md)
TLS_SECONDS = 30  # of the TLS harness: a handshake per input, about 250 inputs a second
CLANG_HINT = "apt-get install -y clang libclang-rt-14-dev (libFuzzer and the sanitizers' runtime, as .ci/run does)"
ARM64_HINT = "apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static (as .ci/run does)"


def build_harness(into: Path, *defines: str, name: str = "fuzz_response", extra: tuple[str, ...] = ()) -> Path:
    """A harness (fuzz_response.c, or `name`.c with the `extra` sources and libraries) and the parser,
    built with libFuzzer, ASan and UBSan (any UB aborts)."""
    clang = program("clang", CLANG_HINT)
    built = into / name
    done = subprocess.run(
        [clang, "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all",
         "-Wall", "-Wextra", "-Werror", *defines, "-I", str(NATIVE), str(FUZZ / f"{name}.c"),
         str(NATIVE / "response.c"), *extra, "-o", str(built)],
        capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"the fuzz harness did not build ({CLANG_HINT}):\n{done.stderr[-3000:]}")
    return built


@pytest.fixture(scope="module", params=[(), PORTABLE], ids=["native", "portable"])
def harness(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """The harness as built here (SSE2 scans on x86-64), and as built where there is no SSE2 (arm64):
    both replay the corpus and are fuzzed, for each has scans of its own."""
    return build_harness(tmp_path_factory.mktemp("fuzz"), *request.param)


def fuzz(harness: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """Run the harness at the lowest priority: the machine is shared, the answer does not depend on speed."""
    return subprocess.run([str(harness), *args], capture_output=True, text=True, timeout=timeout,
                          preexec_fn=lambda: os.nice(19))


def assert_a_bounded_run_finds_nothing(harness: Path, corpus: Path, tmp_path: Path, seconds: int, *,
                                       rss_mb: int = 2048, extra: tuple[str, ...] = ()) -> None:
    """Fuzz `harness` from `corpus` for `seconds`: no crash, leak, timeout or memory blow-up, and it ran.
    What the run adds to the corpus goes to a folder of its own, out of the tree."""
    found = tmp_path / "new"
    found.mkdir()
    done = fuzz(harness, f"-max_total_time={seconds}", f"-rss_limit_mb={rss_mb}", "-timeout=10",
                "-print_final_stats=1", *extra, f"-artifact_prefix={tmp_path}/", str(found), str(corpus),
                timeout=seconds * 10 + 300)
    crashes = [p.name for p in tmp_path.iterdir() if p.name.startswith(("crash-", "leak-", "timeout-", "oom-"))]
    assert done.returncode == 0 and not crashes, f"{crashes}:\n{done.stderr[-5000:]}"
    assert "stat::number_of_executed_units" in done.stderr


def test_the_corpus_replays_clean(harness: Path, tmp_path: Path) -> None:
    seeds = sorted(CORPUS.iterdir())
    assert len(seeds) > 300
    done = fuzz(harness, "-runs=0", f"-artifact_prefix={tmp_path}/", str(CORPUS), timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "INITED" in done.stderr or "Done" in done.stderr, done.stderr[-2000:]


def test_a_bounded_fuzz_run_finds_nothing(harness: Path, tmp_path: Path) -> None:
    assert_a_bounded_run_finds_nothing(harness, CORPUS, tmp_path, SECONDS, extra=(f"-dict={FUZZ / 'http.dict'}",))


@pytest.fixture(scope="module")
def body_harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fuzz_body.c: the parser's body sink into body.c and zlib."""
    return build_harness(tmp_path_factory.mktemp("fuzz-body"), name="fuzz_body",
                         extra=(str(NATIVE / "body.c"), "-lz"))


def test_the_body_corpus_replays_clean(body_harness: Path, tmp_path: Path) -> None:
    assert len(list(BODY_CORPUS.iterdir())) >= 20
    done = fuzz(body_harness, "-runs=0", f"-artifact_prefix={tmp_path}/", str(BODY_CORPUS), timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]


def test_a_bounded_fuzz_run_of_the_inflate_path_finds_nothing(body_harness: Path, tmp_path: Path) -> None:
    assert_a_bounded_run_finds_nothing(body_harness, BODY_CORPUS, tmp_path, SECONDS)


def test_the_corpus_replays_clean_on_arm64(tmp_path: Path) -> None:
    """arm64, the other platform the image and the wheels are built for, has no SSE2: the harness
    cross-compiled for it (with tests/fuzz/replay_main.c in libFuzzer's place) and run under
    qemu-user keeps every promise on every input of the corpus, with arm64's own code."""
    gcc = program("aarch64-linux-gnu-gcc", ARM64_HINT)
    qemu = program("qemu-aarch64-static", ARM64_HINT)
    built = tmp_path / "replay"
    done = subprocess.run(
        [gcc, "-O2", "-static", "-std=c11", "-D_DEFAULT_SOURCE", "-Wall", "-Wextra", "-Werror", "-I", str(NATIVE),
         str(FUZZ / "fuzz_response.c"), str(FUZZ / "replay_main.c"), str(NATIVE / "response.c"), "-o", str(built)],
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"the arm64 replay did not build ({ARM64_HINT}):\n{done.stderr[-3000:]}"
    ran = subprocess.run([qemu, str(built), str(CORPUS)], capture_output=True, text=True, timeout=600,
                         preexec_fn=lambda: os.nice(19))
    inputs = len([p for p in CORPUS.iterdir() if not p.name.startswith(".")])
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout == f"replay: {inputs} inputs, every promise kept\n"


@pytest.fixture(scope="module")
def tls_harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """fuzz_tls.c with tls.c and the parser, linked to the system's OpenSSL, under the sanitizers."""
    clang = program("clang", CLANG_HINT)
    built = tmp_path_factory.mktemp("fuzz-tls") / "fuzz_tls"
    done = subprocess.run(
        [clang, "-g", "-O1", "-fsanitize=fuzzer,address,undefined", "-fno-sanitize-recover=all", "-Wall", "-Wextra",
         "-Werror", "-I", str(NATIVE), str(FUZZ / "fuzz_tls.c"), str(NATIVE / "tls.c"), str(NATIVE / "response.c"),
         "-lssl", "-lcrypto", "-o", str(built)],
        capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"the TLS fuzz harness did not build ({CLANG_HINT}, libssl-dev):\n{done.stderr[-3000:]}")
    return built


def test_the_tls_corpus_replays_clean(tls_harness: Path, tmp_path: Path) -> None:
    assert len(sorted(TLS_CORPUS.iterdir())) > 100
    done = fuzz(tls_harness, "-runs=0", "-rss_limit_mb=4096", f"-artifact_prefix={tmp_path}/", str(TLS_CORPUS),
                timeout=600)
    assert done.returncode == 0, done.stderr[-5000:]
    assert "INITED" in done.stderr or "Done" in done.stderr, done.stderr[-2000:]


def test_a_bounded_tls_fuzz_run_finds_nothing(tls_harness: Path, tmp_path: Path) -> None:
    assert_a_bounded_run_finds_nothing(tls_harness, TLS_CORPUS, tmp_path, TLS_SECONDS, rss_mb=4096)
