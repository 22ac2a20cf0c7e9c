"""The stores themselves: a directory, or an S3 bucket, behind one small interface (Store).

Only four operations are needed, and each is one request to S3: put a whole object (or create
it only if it does not exist yet: If-None-Match: *, which S3 has honoured since 2024, as do
MinIO, Ceph and R2), get one, list the keys under a prefix in order (from a key on), and check
that the store is there. Nothing is ever appended to or read-modified-written, so nothing
needs a lock: each run's index entry is an object of its own (runner.store.layout).

The directory store needs nothing beyond Python: each object is written to a temporary file
in its directory and renamed into place (readers never see half a record), and create-only
is a hard link, which fails if the name is taken, atomically, even on NFS. The S3 store uses
obstore (the optional extra soak-pallet[s3]), imported only when an s3:// store is used: a
Rust client of some 5 MB that imports in about 25 ms (boto3's client takes 900 ms and brings
botocore's 27 MB), does conditional puts, reads the AWS SDKs' environment variables, and
bounds every request with a timeout and a short retry budget.

Every failure is a StoreError whose text is one line: what the store answered (`HTTP 404
NoSuchBucket`), or why it could not be reached.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from datetime import timedelta
from typing import Any, Protocol

from runner.config.storeurl import StoreUrl, s3_endpoint
from runner.core import redact
from runner.core.errors import UsageError, shortened

REQUEST_TIMEOUT = "5s"  # one request to S3, its body included
CONNECT_TIMEOUT = "2s"
RETRIES = 1  # one more try after a failure S3 says may pass (a 5xx, a reset connection)
RETRY_BUDGET = timedelta(seconds=4)
S3_EXTRA = "pip install 'soak-pallet[s3]'"


class StoreError(Exception):
    """A store that could not do what was asked; str() is one line saying why."""


class Store(Protocol):
    """Where records are kept: keys are paths with `/` between their parts, values whole objects."""

    url: StoreUrl

    def put(self, key: str, data: bytes, *, create: bool = False) -> bool:
        """Write the object; with `create`, only if no object has that key (False: one has)."""

    def get(self, key: str) -> bytes | None:
        """The object, or None when there is none of that key."""

    def keys(self, prefix: str, after: str = "") -> Iterator[str]:
        """The keys under `prefix`, in order, only those after `after` when it is given."""

    def check(self) -> str:
        """"" when the store is there to be written to; else what is wrong, in a phrase."""


def open_store(url: StoreUrl, environ: Mapping[str, str] = os.environ) -> Store:
    """The store a URL names (an s3:// one needs obstore: a UsageError, with the install line, without it)."""
    if url.scheme == "file":
        return DirStore(url)
    return S3Store(url, environ)


class DirStore:
    """A directory: each key a file under it, its parts directories."""

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        self.root = url.path

    def _path(self, key: str) -> str:
        parts = key.split("/")
        if any(part in ("", ".", "..") for part in parts):
            raise StoreError(f"{key!r} is not a key of this store")
        return os.path.join(self.root, *parts)

    def put(self, key: str, data: bytes, *, create: bool = False) -> bool:
        path = self._path(key)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd, temporary = tempfile.mkstemp(prefix=".", suffix=".part", dir=os.path.dirname(path))
            try:
                with os.fdopen(fd, "wb") as file:
                    file.write(data)
                if not create:
                    os.replace(temporary, path)
                    return True
                try:
                    os.link(temporary, path)  # fails, atomically, if the name is taken
                except FileExistsError:
                    return False
                return True
            finally:
                if os.path.exists(temporary):
                    os.unlink(temporary)
        except OSError as e:
            raise StoreError(_os_reason(e)) from None

    def get(self, key: str) -> bytes | None:
        try:
            with open(self._path(key), "rb") as file:
                return file.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as e:
            raise StoreError(_os_reason(e)) from None

    def keys(self, prefix: str, after: str = "") -> Iterator[str]:
        top = prefix.rpartition("/")[0]
        start = os.path.join(self.root, *top.split("/")) if top else self.root
        found: list[str] = []
        try:
            for directory, subdirectories, files in os.walk(start, onerror=_raise):
                subdirectories.sort()
                relative = os.path.relpath(directory, self.root).replace(os.sep, "/")
                base = "" if relative == "." else relative + "/"
                found += [base + name for name in files if not name.startswith(".")]
        except FileNotFoundError:
            return iter(())
        except OSError as e:
            raise StoreError(_os_reason(e)) from None
        return iter(sorted(key for key in found if key.startswith(prefix) and key > after))

    def check(self) -> str:
        """The directory, or the nearest one above it that a run would make it in, can be written to."""
        path = self.root
        while not os.path.exists(path) and os.path.dirname(path) != path:
            path = os.path.dirname(path)
        if not os.path.isdir(path):
            return f"{path} is not a directory"
        if not os.access(path, os.W_OK):
            return f"the directory {path} cannot be written to"
        return ""


def _raise(error: OSError) -> None:
    raise error


def _os_reason(error: OSError) -> str:
    where = f": {error.filename}" if error.filename else ""
    return f"{error.strerror or error}{where}"


class S3Store:
    """A bucket of an S3-compatible store, the keys under the URL's prefix."""

    def __init__(self, url: StoreUrl, environ: Mapping[str, str] = os.environ) -> None:
        try:
            from obstore.store import S3Store as Client
        except ImportError:
            raise UsageError(f"resultsStore {url}: an s3:// store needs the S3 client: {S3_EXTRA}") from None
        self.url = url
        endpoint = s3_endpoint(environ)
        config: Any = {"endpoint": endpoint} if endpoint else {}
        options: Any = {"timeout": REQUEST_TIMEOUT, "connect_timeout": CONNECT_TIMEOUT,
                                   "allow_http": endpoint.startswith("http://")}
        retry: Any = {"max_retries": RETRIES, "retry_timeout": RETRY_BUDGET,
                      "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=1),
                                  "base": 2}}
        try:
            self._client = Client(url.bucket, prefix=url.prefix.rstrip("/") or None, config=config,
                                  client_options=options, retry_config=retry)
        except Exception as e:  # noqa: BLE001 - a bad variable in the environment, said in one line
            raise UsageError(f"resultsStore {url}: {_s3_reason(e)}") from None

    def put(self, key: str, data: bytes, *, create: bool = False) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError, PreconditionError

        try:
            obstore.put(self._client, key, data, mode="create" if create else "overwrite")
        except (AlreadyExistsError, PreconditionError):
            return False
        except Exception as e:  # noqa: BLE001 - whatever the client raises is the store's failure
            raise StoreError(_s3_reason(e)) from None
        return True

    def get(self, key: str) -> bytes | None:
        import obstore

        try:
            return bytes(obstore.get(self._client, key).bytes())
        except FileNotFoundError as e:
            if _s3_code(str(e)) == "NoSuchBucket":
                raise StoreError(_s3_reason(e)) from None
            return None
        except Exception as e:  # noqa: BLE001
            raise StoreError(_s3_reason(e)) from None

    def keys(self, prefix: str, after: str = "") -> Iterator[str]:
        import obstore

        try:
            pages = obstore.list(self._client, prefix, offset=after or None)
            for page in pages:
                yield from sorted(str(meta["path"]) for meta in page)
        except Exception as e:  # noqa: BLE001
            raise StoreError(_s3_reason(e)) from None

    def check(self) -> str:
        """Whether the bucket is there: a listing of one key (a HEAD of the bucket needs more rights)."""
        import obstore

        try:
            next(iter(obstore.list(self._client, chunk_size=1)), None)
        except Exception as e:  # noqa: BLE001
            return _s3_reason(e)
        return ""


_STATUS = re.compile(r"status code: (\d{3}[^:<\n]*)")
_CODE = re.compile(r"<Code>([^<]{1,64})</Code>")
_FAILED = re.compile(r" in ([\d.]+)(ms|s) - ([^\n]+)")  # obstore's "PUT ... in 5.0s - HTTP error: ..."
_TIMEOUT_S = float(REQUEST_TIMEOUT.removesuffix("s"))
_CAUSES = ("Connection refused", "connection refused", "timed out", "operation timed out", "dns error",
           "Connection reset", "connection closed", "tls", "certificate")


def _s3_code(text: str) -> str:
    found = _CODE.search(text)
    return found.group(1) if found else ""


def _s3_reason(error: Exception) -> str:
    """What the S3 client said, in one line: `HTTP 404 Not Found NoSuchBucket`, `Connection refused`."""
    text = str(error)
    status, code = _STATUS.search(text), _s3_code(text)
    if status:
        return redact.printable(f"HTTP {status.group(1).strip()}" + (f" {code}" if code else ""))
    cause = next((c for c in _CAUSES if c in text), "")
    failed = _FAILED.search(text)
    if not cause and failed is not None:
        seconds = float(failed.group(1)) / (1000 if failed.group(2) == "ms" else 1)
        cause = (f"no answer within {REQUEST_TIMEOUT}" if seconds >= _TIMEOUT_S - 0.1 and "sending" in failed.group(3)
                 else f"{failed.group(3).strip()} (after {seconds:.1f}s)")
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    return redact.printable(shortened(cause or first, 200))
