"""Where run records go (the resultsStore setting, and the stores `soak history` and the reports
read): a store's URL, checked and taken apart. Pure.

Two kinds, each a URL a user already knows from other tools: `file:///DIR`, a directory (a
PersistentVolumeClaim mounted in the pod, or a laptop's), and `s3://BUCKET/PREFIX`, a bucket of
any S3-compatible store, as the AWS CLI writes it. Everything about reaching the store
(credentials, region, endpoint) comes from the environment, as the AWS SDKs read it, so the
URL itself never holds a secret: one with a user name or password is refused, and so is one
with a query or fragment (the commands that read a store take their range there, not the
setting).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit

from runner.core.lazymethods import dataclass

SCHEMES = ("file", "s3")
STORE_WAIT_S = 10.0  # the longest a run waits at its end for its record to be stored (runner.store.writer)
# The S3 endpoint as the AWS SDKs read it: the service's own variable first, then the general one.
ENDPOINT_VARIABLES = ("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL")
# S3's rules for a bucket's name (general purpose buckets): 3 to 63 lowercase letters, digits,
# dots and hyphens, starting and ending with a letter or digit.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class StoreUrl:
    """A store: `scheme` file (`path` the directory) or s3 (`bucket`, and `prefix` the keys
    start with: "" or ending in "/"). `text` is the URL as given, for messages."""

    scheme: str
    text: str
    path: str = ""
    bucket: str = ""
    prefix: str = ""

    def __str__(self) -> str:
        return self.text


def store_url_problem(text: str, *, query: bool = False) -> str:
    """What is wrong with a store URL, as a phrase to follow it; "" when nothing is.

    `query`: a `?...` part is allowed (a command's range); the setting takes none.
    """
    scheme, colon, _ = text.partition(":")
    if not colon or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return "is not a store URL: file:///DIR or s3://BUCKET/PREFIX"
    if scheme.lower() not in SCHEMES:
        return f"has the scheme {scheme}:, which is no store this version writes to: file:///DIR or s3://BUCKET/PREFIX"
    if any(ch.isspace() for ch in text) or not text[len(scheme) + 1:].startswith("//"):
        return f"is not a store URL: {scheme}:// then the {'directory' if scheme == 'file' else 'bucket'}"
    parts = urlsplit(text)
    if parts.fragment or (parts.query and not query) or text.endswith(("?", "#")):
        return "is not allowed: a store URL has no query or fragment (?, #) here"
    if "@" in parts.netloc:
        return "is not allowed: user names and passwords do not go in the URL (credentials come from the environment)"
    if parts.scheme == "file":
        return _file_problem(parts.netloc, parts.path)
    return _s3_problem(parts.netloc)


def _file_problem(host: str, path: str) -> str:
    if host not in ("", "localhost"):
        return (f"names the host {host!r}: a file store is a directory on this machine, written file:///DIR "
                "(three slashes, an absolute path)")
    if not unquote(path).strip("/"):
        return "names no directory: file:///DIR"
    if "\x00" in unquote(path):
        return "is not allowed: a path has no NUL character"
    return ""


def _s3_problem(bucket: str) -> str:
    if not bucket:
        return "names no bucket: s3://BUCKET/PREFIX"
    if not _BUCKET.match(bucket) or ".." in bucket:
        return (f"names the bucket {bucket!r}, which is no S3 bucket name: 3 to 63 lowercase letters, digits, dots "
                "and hyphens, starting and ending with a letter or digit")
    return ""


def parse_store_url(text: str) -> StoreUrl:
    """The store a checked URL names (store_url_problem(text) is ""); any query is left out."""
    parts = urlsplit(text)
    if parts.scheme == "file":
        return StoreUrl("file", text, path="/" + unquote(parts.path).strip("/"))
    prefix = unquote(parts.path).strip("/")
    return StoreUrl("s3", text, bucket=parts.netloc, prefix=prefix + "/" if prefix else "")


def is_store_url(text: str) -> bool:
    """Whether a command's argument names a store rather than a file: it starts with a store's scheme."""
    return text.lower().startswith(tuple(f"{scheme}://" for scheme in SCHEMES))


def s3_endpoint(environ: Mapping[str, str]) -> str:
    """The S3 endpoint the environment names (a MinIO, a Ceph, R2 ...), or "" for AWS's own."""
    return next((environ[name] for name in ENDPOINT_VARIABLES if environ.get(name)), "")
