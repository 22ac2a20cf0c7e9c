"""What pyproject.toml cannot say: the optional C extension.

runner.load.native._response (the native response parser, runner/load/native/response.c,
behind a binding for its tests) and runner.load.native._engine (the native engine: core.c's
loop on that parser, engine.c its binding) are built where a C compiler and the Python
headers exist; `optional=True` makes a failed build a warning, so `pip install .` still
installs the pure-Python package where they do not. Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

NATIVE = "runner/load/native"

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
            sources=[f"{NATIVE}/engine.c", f"{NATIVE}/core.c", f"{NATIVE}/response.c", f"{NATIVE}/body.c"],
            depends=[f"{NATIVE}/{name}" for name in ("core.h", "histogram.h", "schedule.h", "response.h", "body.h")],
            extra_compile_args=["-std=c11"],
            libraries=["m", "z"],  # zlib: a hashed gzip body is inflated (body.c)
            optional=True,
        ),
    ],
)
