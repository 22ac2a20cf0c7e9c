"""The native (C) parts of the load layer: the HTTP/1.1 response parser the native engine
will run on, `response.c` (pure C11, no CPython), and `_response`, its binding for tests.

The extension is optional: `pip install .` builds it where a C compiler and the Python
headers exist and installs the pure-Python package where they do not, so nothing in
runner imports it unconditionally. docs/development.md says how to build and fuzz it.
"""
