"""What pyproject.toml cannot say: the optional C extension.

runner.load.native._response (the native response parser, runner/load/native/response.c,
behind a binding for its tests) is built where a C compiler and the Python headers exist;
`optional=True` makes a failed build a warning, so `pip install .` still installs the
pure-Python package where they do not. Everything else is in pyproject.toml.
"""

from setuptools import Extension, setup

NATIVE = "runner/load/native"

setup(
    ext_modules=[
        Extension(
            "runner.load.native._response",
            sources=[f"{NATIVE}/_response.c", f"{NATIVE}/response.c"],
            depends=[f"{NATIVE}/response.h"],
            optional=True,
        ),
    ],
)
