"""The hash of a sampled body (hashSampleRate), as its application sees it: inflated if gzipped.

With `compress`, the client asks for gzip, and a body is hashed after inflating, so the
hash does not depend on whether the server compressed that response. Only a response that
says `Content-Encoding: gzip` is inflated: a server may send any response uncompressed.
The Python engine hashes through here, and the native engine is handed its bounds and texts,
so they agree on which bodies are inflated and on how
a body that claims gzip but is not fails.

Inflating is bounded three ways. Each step inflates at most INFLATE_STEP bytes, so a small
body that inflates to gigabytes is never held in memory at once; the Python engine takes one
step at a time, yielding to the event loop in between (hashing is pure Python, about 70 ms
a MiB, and one 64 KiB read of a gzip bomb inflates to 64 MiB: seconds of a blocked loop);
and a body that inflates past MAX_INFLATED_BYTES fails, as a head past its bound does, rather
than costing a second of CPU per 16 MiB for as long as the server cares to send.
"""

from __future__ import annotations

import re
import zlib

from runner.load.failures import GZIP_TEXT
from runner.load.fnv import Fnv1a64

INFLATE_STEP = 1 << 16  # most inflated bytes produced, held and hashed in one step (about 5 ms)
MAX_INFLATED_BYTES = 16 << 20  # most bytes a sampled gzip body may inflate to
_GZIP_ONLY = 16 + zlib.MAX_WBITS  # a gzip header and trailer, nothing else
_ZLIB_ERROR = re.compile(r"^Error -?\d+ while [a-z ]+: ")  # "Error -3 while decompressing data: "


def too_large(bound: int) -> str:
    """The failure of a body that inflates past `bound` bytes (MAX_INFLATED_BYTES)."""
    return f"protocol: gzip body inflates to more than {bound >> 20} MiB"


def not_gzip(reason: str) -> str:
    """The failure of a body that says gzip and is not: `reason` is zlib's (or why it ended early)."""
    return f"{GZIP_TEXT} ({reason})"


CUT_TEXT = not_gzip("it ends before its gzip stream does")


def body_texts() -> tuple[str, str, str, str]:
    """What the native engine (runner/load/native/body.c) calls the same failures, as data: the text
    before zlib's reason and after it, a body past the bound, one cut before its gzip stream ends."""
    before, after = not_gzip("\0").split("\0")
    return before, after, too_large(MAX_INFLATED_BYTES), CUT_TEXT


class BodyError(Exception):
    """The body could not be read as what its headers say: its text is the failure's."""


def is_gzip(content_encoding: str) -> bool:
    """Whether a Content-Encoding value says gzip (its x-gzip alias included)."""
    return content_encoding.strip().lower() in ("gzip", "x-gzip")


class BodyHash:
    """FNV-1a 64 of a body fed in pieces; of the inflated body when `gzip`.

    update() takes each piece as it came on the wire; a plain piece (one read, at most 64 KiB)
    is hashed at once, a gzipped one is kept for step() to inflate and hash a bounded part of
    at a time, while `pending` says there is more to do.
    """

    __slots__ = ("_hasher", "_inflate", "_empty", "_tail", "_full", "_inflated")

    def __init__(self, gzip: bool) -> None:
        self._hasher = Fnv1a64()
        self._inflate = zlib.decompressobj(wbits=_GZIP_ONLY) if gzip else None
        self._empty = True  # no body at all is an empty body, whatever the headers say
        self._tail = b""  # compressed bytes not inflated yet
        self._full = False  # the last step filled its output: zlib may hold more of it
        self._inflated = 0

    def update(self, data: bytes) -> None:
        """The next piece of the body as it came on the wire: hashed now if plain, kept for step() if gzip."""
        if self._inflate is None:
            self._hasher.update(data)
            return
        if data and not self._inflate.eof:
            self._empty = False
            self._tail = self._tail + data if self._tail else data

    @property
    def pending(self) -> bool:
        """Whether step() has work left: compressed bytes not yet inflated and hashed."""
        inflate = self._inflate
        return inflate is not None and not inflate.eof and bool(self._tail or self._full)

    def step(self) -> None:
        """Inflate and hash at most INFLATE_STEP bytes of what update() kept; BodyError if it does
        not inflate, or inflates past MAX_INFLATED_BYTES."""
        inflate = self._inflate
        assert inflate is not None
        try:
            out = inflate.decompress(self._tail, INFLATE_STEP)
        except zlib.error as exc:
            raise BodyError(not_gzip(_ZLIB_ERROR.sub('', str(exc)))) from None
        self._tail = b"" if inflate.eof else inflate.unconsumed_tail  # after the gzip stream: ignored
        self._full = len(out) == INFLATE_STEP
        self._inflated += len(out)
        if self._inflated > MAX_INFLATED_BYTES:
            raise BodyError(too_large(MAX_INFLATED_BYTES))
        self._hasher.update(out)

    def value(self) -> int:
        """The hash of the whole body (what step() has left is done first); BodyError if a gzip body
        ended before its gzip stream did."""
        while self.pending:
            self.step()
        if self._inflate is not None and not self._inflate.eof and not self._empty:
            raise BodyError(CUT_TEXT)
        return self._hasher.value
