"""The hash of a sampled body (hashSampleRate), as its application sees it: inflated if gzipped.

With `compress`, the client asks for gzip, and a body is hashed after inflating, so the
hash does not depend on whether the server compressed that response. Only a response that
says `Content-Encoding: gzip` is inflated: a server may send any response uncompressed.
Both transports hash through here, so they agree on which bodies are inflated and on how
a body that claims gzip but is not fails.

Inflating is bounded: each piece of compressed input is inflated at most INFLATE_STEP bytes
at a time, so a small body that inflates to gigabytes is never held in memory at once.
"""

from __future__ import annotations

import re
import zlib

from runner.load.failures import GZIP_TEXT
from runner.load.fnv import Fnv1a64

INFLATE_STEP = 1 << 16  # most inflated bytes produced (and held) at once
_GZIP_ONLY = 16 + zlib.MAX_WBITS  # a gzip header and trailer, nothing else
_ZLIB_ERROR = re.compile(r"^Error -?\d+ while [a-z ]+: ")  # "Error -3 while decompressing data: "


class BodyError(Exception):
    """The body could not be read as what its headers say: its text is the failure's."""


def is_gzip(content_encoding: str) -> bool:
    """Whether a Content-Encoding value says gzip (its x-gzip alias included)."""
    return content_encoding.strip().lower() in ("gzip", "x-gzip")


class BodyHash:
    """FNV-1a 64 of a body fed in pieces; of the inflated body when `gzip`."""

    __slots__ = ("_hasher", "_inflate", "_empty")

    def __init__(self, gzip: bool) -> None:
        self._hasher = Fnv1a64()
        self._inflate = zlib.decompressobj(wbits=_GZIP_ONLY) if gzip else None
        self._empty = True  # no body at all is an empty body, whatever the headers say

    def update(self, data: bytes) -> None:
        """Hash the next piece of the body as it came on the wire; BodyError if it does not inflate."""
        inflate = self._inflate
        if inflate is None:
            self._hasher.update(data)
            return
        self._empty = self._empty and not data
        try:
            while data and not inflate.eof:
                self._hasher.update(inflate.decompress(data, INFLATE_STEP))
                data = inflate.unconsumed_tail
        except zlib.error as exc:
            raise BodyError(f"{GZIP_TEXT} ({_ZLIB_ERROR.sub('', str(exc))})") from None

    def value(self) -> int:
        """The hash of the whole body; BodyError if a gzip body ended before its gzip stream did."""
        if self._inflate is not None and not self._inflate.eof and not self._empty:
            raise BodyError(f"{GZIP_TEXT} (it ends before its gzip stream does)")
        return self._hasher.value
