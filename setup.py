"""What pyproject.toml cannot say: the optional C extension.

runner.load.native._response (the native response parser, runner/load/native/response.c,
behind a binding for its tests), runner.load.native._engine (the native engine: core.c's
loop on that parser, engine.c its binding) and runner.load.native._counts (a histogram's
running totals for runner.stats.histogram, counts.c) are built where a C compiler and the Python
headers exist; `optional=True` makes a failed build a warning, so `pip install .` still
installs the pure-Python package where they do not. The engine speaks TLS through the system's
OpenSSL (libssl, linked here) where its headers are (libssl-dev); without them it is built
without TLS (SOAK_NO_TLS), and https runs take the Python engine, which says why at start-up.
Everything else is in pyproject.toml.
"""

import os
import shlex
import subprocess
import sysconfig

from setuptools import Extension, setup

NATIVE = "runner/load/native"


def has_openssl() -> bool:
    """Whether the C compiler finds OpenSSL's headers (the preprocessor alone: nothing is built)."""
    compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
    try:
        done = subprocess.run([*compiler, "-E", "-x", "c", "-"], input=b"#include <openssl/ssl.h>\n",
                              capture_output=True, timeout=120, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


TLS = has_openssl()

setup(
    ext_modules=[
        Extension(
            "runner.load.native._response",
            sources=[f"{NATIVE}/_response.c", f"{NATIVE}/response.c"],
            depends=[f"{NATIVE}/response.h", f"{NATIVE}/pyput.h"],
            optional=True,
        ),
        Extension(
            "runner.load.native._engine",
            sources=[f"{NATIVE}/engine.c", f"{NATIVE}/core.c", f"{NATIVE}/response.c", f"{NATIVE}/body.c",
                     *([f"{NATIVE}/tls.c"] if TLS else [])],
            depends=[f"{NATIVE}/{name}"
                     for name in ("core.h", "histogram.h", "schedule.h", "response.h", "body.h", "tls.h")],
            extra_compile_args=["-std=c11"],
            define_macros=[] if TLS else [("SOAK_NO_TLS", "1")],
            # zlib: a hashed gzip body is inflated (body.c); OpenSSL: https (tls.c)
            libraries=["m", "z", *(["ssl", "crypto"] if TLS else [])],
            optional=True,
        ),
        Extension(
            "runner.load.native._counts",
            sources=[f"{NATIVE}/counts.c"],
            optional=True,
        ),
    ],
)
