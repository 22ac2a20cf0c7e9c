"""The native parser and engine build cleanly, and `pip install .` works with or without a compiler.

The C is held to C11 with -Wall -Wextra -Werror under both compilers the project uses (gcc
builds the extension, clang the fuzzer). The extension is optional (setup.py): where a
compiler and the Python headers exist pip builds it, and where they do not it still
installs the pure-Python package, so the Python engine (on httpx) keeps working there (and
the native engine's Python side says it is not there).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.support.programs import program
from tests.support.replay import PORTABLE

NATIVE = REPO / "runner" / "load" / "native"
STRICT = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-c", "-o", os.devnull]
HINTS = {"gcc": "apt-get install -y gcc", "clang": "apt-get install -y clang libclang-rt-14-dev"}


@pytest.mark.parametrize("compiler", ["gcc", "clang"])
def test_the_c_sources_compile_without_a_warning(compiler: str) -> None:
    cc = program(compiler, HINTS[compiler])
    python_headers = sysconfig.get_paths()["include"]
    pure = ["-pedantic", "-Wconversion", "-Wshadow"]
    binding = ["-fPIC", "-I", python_headers]
    for source, extra in ((NATIVE / "response.c", pure), (NATIVE / "response.c", [*pure, *PORTABLE]),
                          (NATIVE / "_response.c", binding),
                          (NATIVE / "core.c", pure), (NATIVE / "tls.c", pure), (NATIVE / "body.c", pure),
                          (NATIVE / "core.c", [*pure, "-DSOAK_NO_TLS"]), (NATIVE / "engine.c", [*binding, "-Wshadow"]),
                          (NATIVE / "engine.c", [*binding, "-Wshadow", "-DSOAK_NO_TLS"]),
                          (NATIVE / "counts.c", [*binding, "-Wshadow", "-Wconversion"])):
        done = subprocess.run([cc, *STRICT, *extra, str(source)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and not done.stderr, f"{compiler} {source.name} {extra}:\n{done.stderr}"


def test_the_c_sources_compile_for_arm64_without_a_warning() -> None:
    """arm64, the other platform the image and the wheels are built for, compiles the engine and
    the parser too: no SSE2 there, and no epoll_wait system call (only epoll_pwait). Debian's
    cross compiler checks it here; the image and wheel builds compile it there."""
    cc = program("aarch64-linux-gnu-gcc", "apt-get install -y gcc-aarch64-linux-gnu libc6-dev-arm64-cross")
    pure = ["-pedantic", "-Wconversion", "-Wshadow"]
    for source in (NATIVE / "response.c", NATIVE / "core.c"):
        done = subprocess.run([cc, *STRICT, "-O2", *pure, str(source)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0 and not done.stderr, f"arm64 {source.name}:\n{done.stderr}"


def test_the_tree_the_tests_run_has_the_native_engine_built() -> None:
    """The tests run `python -m runner` from the tree (REPO), not from site-packages: installed
    with `pip install '.[test]'`, the tree had no compiled engine and every native test was
    skipped as "not built here" while gcc stood by. Where gcc and the Python headers exist, the
    tree's runner must have it (README's `pip install -e '.[test]'` builds it in place)."""
    program("gcc", HINTS["gcc"])
    assert Path(sysconfig.get_paths()["include"], "Python.h").exists(), "no Python headers: apt-get install python3-dev"
    done = subprocess.run([sys.executable, "-c", "import runner.load.native.engine as e; print(e.module() is not None)"],
                          capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.stdout == "True\n", ("the native engine is not built in the tree the tests run "
                                      f"({REPO}): pip install -e '.[test]' builds it in place", done.stderr)


def test_without_openssl_headers_the_engine_has_no_tls_and_https_takes_the_python_engine(tmp_path: Path) -> None:
    """setup.py builds the engine with SOAK_NO_TLS where OpenSSL's headers are not (tls.h's stubs,
    no libssl linked): it loads, says it has no TLS, and an https load is refused to it with the
    reason the start-up line gives, while plain HTTP is still its."""
    cc = program("gcc", HINTS["gcc"])
    target = tmp_path / f"_engine{sysconfig.get_config_var('EXT_SUFFIX')}"
    done = subprocess.run([cc, "-std=c11", "-shared", "-fPIC", "-O1", "-DSOAK_NO_TLS", "-I",
                           sysconfig.get_paths()["include"], "-o", str(target),
                           *(str(NATIVE / name) for name in ("engine.c", "core.c", "response.c", "body.c")), "-lm", "-lz"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    code = f"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("runner.load.native._engine", {str(target)!r})
module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module)
sys.modules["runner.load.native._engine"] = module
from runner.load.model import Load
from runner.load.model import Closed
from runner.load.native.engine import _load_refusal
from runner.load.request import Request
from runner.load.transport import TransportOptions
options = TransportOptions(timeout_ns=10**9, no_reuse=False, compress=False, max_connections=1)
for url in ("https://127.0.0.1:8443/", "http://127.0.0.1:8080/"):
    print(_load_refusal(Load([Request("GET", url, (), b"")], Closed()), options))
print(module.TLS)
"""
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.splitlines() == [
        "TLS (the native engine was built without OpenSSL's headers: apt-get install libssl-dev)", "None", "0"]


# The tree's engine loaded after records.py's TallyCounts was given two fields the other way round.
_SWAPPED = """
import collections, runner.load.native.records as records
fields = list(records.TallyCounts._fields)
fields[0], fields[1] = fields[1], fields[0]
records.TallyCounts = collections.namedtuple("TallyCounts", fields)
try:
    import runner.load.native._engine
except TypeError as refused:
    print(refused)
"""


def test_an_engine_whose_records_disagree_with_records_py_refuses_to_load() -> None:
    """What crosses the boundary is records.py's records, field for field engine.c's tables:
    a field moved on one side stops the engine from loading, naming it, where a dict read by key
    would have read the wrong count for the rest of every run."""
    done = subprocess.run([sys.executable, "-c", _SWAPPED], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert done.stdout == "records.TallyCounts: field 0 is good in the engine's table, bad here\n", done


def _tree(into: Path) -> Path:
    """The project's sources, without anything built from them (a build/ left by an earlier
    install would be reused by setuptools, whatever the compiler)."""
    ignore = shutil.ignore_patterns(".git", ".venv", ".ci-venv", "build", "*.egg-info", "*.so", "__pycache__",
                                    ".mypy_cache", ".pytest_cache")
    return Path(shutil.copytree(REPO, into / "src", ignore=ignore))


def _install(tree: Path, target: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--target",
                           str(target), "-v", "."], cwd=tree, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **env})


def _python_in(target: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` with only the installed copy importable (not the tree's runner/)."""
    return subprocess.run([sys.executable, "-c", code], cwd=target, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(target)})


def test_pip_install_builds_the_extension_where_a_compiler_exists(tmp_path: Path) -> None:
    program("gcc", HINTS["gcc"])
    target = tmp_path / "installed"
    done = _install(_tree(tmp_path), target)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert sorted((target / "runner" / "load" / "native").glob("_response*.so")), done.stdout[-3000:]
    assert sorted((target / "runner" / "load" / "native").glob("_engine*.so")), done.stdout[-3000:]
    assert not sorted((target / "runner" / "load" / "native").glob("*.[ch]"))  # sources stay in the sdist
    used = _python_in(target, "from runner.load.native import _response as p; import runner.load.native as n; "
                              "print(n.__file__, p.parse('GET', [b'HTTP/1.1 204 No\\r\\n\\r\\n'], 102400)['status'])")
    assert used.returncode == 0 and used.stdout.startswith(str(target)) and used.stdout.split()[-1] == "204", used
    engine = _python_in(target, "from runner.load.native.engine import module; print(module().__file__)")
    assert engine.returncode == 0 and engine.stdout.startswith(str(target)), engine


def test_pip_install_without_a_compiler_installs_the_python_package(tmp_path: Path) -> None:
    target = tmp_path / "installed"
    done = _install(_tree(tmp_path), target, CC="/bin/false")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert 'building extension "runner.load.native._response" failed' in done.stdout + done.stderr
    assert 'building extension "runner.load.native._engine" failed' in done.stdout + done.stderr
    assert not sorted((target / "runner" / "load" / "native").glob("_*.so"))
    used = _python_in(target, "import runner.cli, runner.load.httpx_transport\n"
                              "try:\n    import runner.load.native._response\nexcept ImportError:\n    print('python')")
    assert used.returncode == 0 and used.stdout.strip() == "python", used
    engine = _python_in(target, "from runner.load.native.engine import module, refusal\n"
                                "from runner.load.model import Load\nprint(module())")
    assert engine.returncode == 0 and engine.stdout.strip() == "None", engine


def test_pip_install_in_a_fresh_venv_without_gcc_runs_soak_on_the_python_engine(tmp_path: Path) -> None:
    """README's `pip install . && soak demo` on a machine with no C compiler (a PATH without
    gcc or cc): the install succeeds, as pure Python, and soak says at start-up that it runs
    on the Python engine, and why."""
    tree = _tree(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    no_compiler = tmp_path / "bin"  # nothing in it: PATH has the venv and no compiler at all
    no_compiler.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k not in ("CC", "LDSHARED")},
           "PATH": f"{venv / 'bin'}:{no_compiler}"}
    done = subprocess.run([str(venv / "bin" / "pip"), "install", "-v", "--disable-pip-version-check",
                           "--constraint", "requirements.lock", "."], cwd=tree, capture_output=True, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert 'building extension "runner.load.native._engine" failed' in done.stdout + done.stderr
    run = subprocess.run([str(venv / "bin" / "soak"), "demo"], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0].startswith("soak: engine: python ("), run.stderr
    summary = json.loads(run.stdout[run.stdout.index("\n{"):])
    assert summary["engine"] == "python" and summary["good"] == summary["requests"] > 0
