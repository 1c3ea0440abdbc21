"""Bounded, sandboxed reading of files that came from someone else (run directories, logs).

A run directory or a log is data a user may have been sent. Reading it must never make xlaprof
read other files of the analysing machine, hang on a FIFO, or run out of memory on a device
file or a decompression bomb. Every reader here therefore:

* opens only regular files (``O_NONBLOCK`` on open, then ``fstat``: a FIFO or a device is
  refused before a byte is read, so nothing blocks);
* reads at most a stated number of bytes, and for gzip checks that limit *while* inflating;
* resolves names found inside a directory only inside that directory (``resolve_inside``).

Errors are ``UnsafeFile`` (a ``ValueError``): callers turn them into a warning or into the
``XlaprofError`` that fits their input.
"""

from __future__ import annotations

import os
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path

# One HLO text of a graph: the writer keeps graphs up to 64 MB (before compression).
DEFAULT_GZIP_LIMIT = 256 * 1024**2
# Lines longer than this are cut into pieces: no report or log line is anywhere near it.
MAX_LINE_BYTES = 1024**2
_CHUNK = 1024**2


class UnsafeFile(ValueError):
    """A file that is not a regular file, is too large, is corrupt, or lies outside its root."""


def open_regular(path: Path) -> int:
    """Open ``path`` read-only and return the descriptor, or raise if it is no regular file.

    ``O_NONBLOCK`` keeps ``open`` from waiting for a FIFO's writer; ``fstat`` on the opened
    descriptor (not the name) decides, so a swapped-in symlink cannot slip past the check.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise UnsafeFile(f"{path}: not a regular file")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_capped(path: Path, limit: int) -> bytes:
    """The bytes of regular file ``path``; ``UnsafeFile`` if it holds more than ``limit``."""
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFile(f"{path}: larger than {limit} bytes")
    return data


def gunzip_capped(data: bytes, limit: int = DEFAULT_GZIP_LIMIT, name: str = "data") -> bytes:
    """Inflate gzip ``data`` (all members), refusing output beyond ``limit`` bytes as it goes.

    ``gzip.decompress`` inflates everything before anyone can look at the size: a few MB of
    zeros become gigabytes. Here each step asks for at most what the limit still allows.
    """
    out = bytearray()
    rest = data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        chunk = rest
        while chunk:
            try:
                piece = inflater.decompress(chunk, limit - len(out) + 1)
            except zlib.error as error:
                raise UnsafeFile(f"{name}: corrupt gzip data ({error})") from None
            out += piece
            if len(out) > limit:
                raise UnsafeFile(f"{name}: inflates to more than {limit} bytes")
            chunk = inflater.unconsumed_tail
            if inflater.eof:
                break
        if not inflater.eof:
            raise UnsafeFile(f"{name}: truncated gzip data")
        rest = inflater.unused_data.lstrip(b"\x00")  # members may be padded with zeros
    if not data:
        raise UnsafeFile(f"{name}: empty gzip data")
    return bytes(out)


def read_gzip_capped(path: Path, limit: int = DEFAULT_GZIP_LIMIT) -> bytes:
    """The inflated contents of the gzip file ``path``, at most ``limit`` bytes of them."""
    # Compressed data never legitimately exceeds the inflated limit by much.
    return gunzip_capped(read_capped(path, limit), limit, name=str(path))


def resolve_inside(root: Path, name: object) -> Path:
    """``root / name`` if that names a file inside ``root``; ``UnsafeFile`` otherwise.

    ``name`` comes from a file inside the run directory (``graphs/index.jsonl``), so it may be
    anything: an absolute path, ``../..``, a symlink pointing out, not a string at all.
    """
    if not isinstance(name, str) or not name or "\x00" in name:
        raise UnsafeFile(f"{root}: {name!r} is not a file name")
    if os.path.isabs(name):
        raise UnsafeFile(f"{root}: {name!r} is an absolute path; only names inside are read")
    base = root.resolve()
    target = (base / name).resolve()
    if target != base and base not in target.parents:
        raise UnsafeFile(f"{root}: {name!r} points outside it; only names inside are read")
    return target


def iter_lines(path: Path, limit: int | None = None) -> Iterator[bytes]:
    """The lines of regular file ``path``, split on ``\\n`` only (kept), streamed.

    Memory is bounded by ``MAX_LINE_BYTES``: a longer line comes out in pieces, so a file
    with no newline at all is still read in bounded steps. Byte offsets of lines are the sums
    of the lengths before them, which is how run directories tie log lines to steps.
    ``limit`` stops after that many bytes (the rest is not read).
    """
    fd = open_regular(path)
    remaining = limit
    with os.fdopen(fd, "rb") as handle:
        while remaining is None or remaining > 0:
            size = MAX_LINE_BYTES if remaining is None else min(MAX_LINE_BYTES, remaining)
            line = handle.readline(size)
            if not line:
                return
            if remaining is not None:
                remaining -= len(line)
            yield line
