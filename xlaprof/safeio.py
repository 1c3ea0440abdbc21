"""Bounded, sandboxed reading of files that came from someone else (run directories, logs).

A run directory or a log is data a user may have been sent. Reading it must never make xlaprof
read other files of the analysing machine, hang on a FIFO, or run out of memory on a device
file or a decompression bomb. Every reader here therefore:

* opens only regular files (``O_NONBLOCK`` on open, then ``fstat``: a FIFO or a device is
  refused before a byte is read, so nothing blocks);
* reads at most a stated number of bytes, and for gzip checks that limit *while* inflating;
* resolves names found inside a directory only inside that directory (``resolve_inside``).

Writing is the mirror image: a folder someone sent may hold symlinks where xlaprof will write
(a cache beside a capture, its temporary file). Every file xlaprof creates is therefore created
exclusively and without following a link (``create_exclusive``, ``temp_beside``), under a name
nobody can guess (not the pid), and renamed into place only over a path that is not a link
(``replace_into``). Files xlaprof reuses (caches) are trusted only when owned by this user and
signed with this user's private key (``user_key``): a received folder can hold a cache, never
one that xlaprof here accepts.

Errors are ``UnsafeFile`` (a ``ValueError``): callers turn them into a warning or into the
``XlaprofError`` that fits their input; ``TooLarge`` is the one that ``--max-size`` lifts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

if TYPE_CHECKING:
    import mmap

# One HLO text of a graph: the writer keeps graphs up to 64 MB (before compression).
DEFAULT_GZIP_LIMIT = 256 * 1024**2
# Lines longer than this are cut into pieces: no report or log line is anywhere near it.
MAX_LINE_BYTES = 1024**2
_CHUNK = 1024**2


# The default cap of a protobuf capture: protobuf cannot parse a message of 2 GiB or more.
DEFAULT_XPLANE_LIMIT = 2 * 1024**3 - 1


class UnsafeFile(ValueError):
    """A file that is not a regular file, is too large, is corrupt, or lies outside its root."""


class TooLarge(UnsafeFile):
    """A file (or what it inflates to) over its size cap: ``--max-size`` raises the cap."""

    def __init__(self, message: str, size: int | None = None, limit: int = 0) -> None:
        super().__init__(message)
        self.size, self.limit = size, limit


def open_regular(path: Path, follow: bool = True) -> int:
    """Open ``path`` read-only and return the descriptor, or raise if it is no regular file.

    ``O_NONBLOCK`` keeps ``open`` from waiting for a FIFO's writer; ``fstat`` on the opened
    descriptor (not the name) decides, so a swapped-in symlink cannot slip past the check.
    ``follow=False`` refuses a link in the last component (``O_NOFOLLOW``): for paths already
    resolved and checked (the MCP server's), where a link swapped in afterwards must not count.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags)
    except OSError as error:
        if not follow and os.path.islink(path):
            raise UnsafeFile(f"{path}: a symbolic link; refused") from None
        raise error
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


def read_capped_mapped(path: Path, limit: int) -> bytes | mmap.mmap:
    """``read_capped``'s bytes in an anonymous map of their own (``mmap``, private to this
    process): memory its reader may give back to the kernel in pieces as it is done with them
    (madvise), which a ``bytes`` object's is not. ``bytes`` as ``read_capped`` reads them where
    there is nothing to map (an empty file, a system without private anonymous maps) or the
    file's size changed while it was read."""
    import mmap

    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        size = _size_under(handle, path, limit)
        private = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
        if size and private:
            # private: memory given back is freed (a shared map's would stay held, unmapped)
            mapped = mmap.mmap(-1, size, flags=private)
            view = memoryview(mapped)
            got = 0
            try:
                while got < size:
                    read = handle.readinto(view[got:])
                    if not read:
                        break
                    got += read
                grew = bool(handle.read(1))
            finally:
                view.release()
            if got == size and not grew:
                return mapped
            mapped.close()
    return read_capped(path, limit)


def read_capped(path: Path, limit: int, follow: bool = True) -> bytes:
    """The bytes of regular file ``path``; ``TooLarge`` if it holds more than ``limit``.

    The size is asked of the open file first, so a (sparse) file far over the cap is refused
    before a byte is read; the read itself stops at ``limit`` for a file that grows meanwhile.
    It asks for the size found (and one byte more, to see growth): asking for ``limit`` bytes
    at once makes Python allocate that much and shrink it (17 ms against 6 ms for 28 MB under
    a 2 GiB cap). ``follow=False``: a link in the last component is refused (``open_regular``).
    """
    fd = open_regular(path, follow)
    with os.fdopen(fd, "rb") as handle:
        size = _size_under(handle, path, limit)
        data = handle.read(size + 1)
        if len(data) > size:  # it grew since: read on, up to the cap
            data += handle.read(limit + 1 - len(data))
    if len(data) > limit:
        raise TooLarge(f"{path}: larger than {limit} bytes", len(data), limit)
    return data


def _size_under(handle: BinaryIO, path: Path, limit: int) -> int:
    """The open file's size, asked of the file itself; ``TooLarge`` over ``limit``."""
    size = os.fstat(handle.fileno()).st_size
    if size > limit:
        raise TooLarge(f"{path}: larger than {limit} bytes", size, limit)
    return size


def _content_hash() -> hashlib.blake2b:
    """The one hash content fingerprints are taken with (``file_digest``, ``data_digest``)."""
    return hashlib.blake2b(digest_size=32)


def data_digest(data: bytes) -> str:
    """``file_digest`` of bytes already read: a file's fingerprint from the very bytes a reader
    used (the file may change after it was read), without reading it again."""
    digest = _content_hash()
    digest.update(data)
    return digest.hexdigest()


def file_digest(path: Path, limit: int) -> str:
    """A content fingerprint (BLAKE2b) of regular file ``path``, read in bounded chunks.

    Size and mtime say nothing of content: ``cp -p``, ``rsync -t`` and tar keep both.
    """
    digest = _content_hash()
    fd = open_regular(path)
    with os.fdopen(fd, "rb") as handle:
        if os.fstat(handle.fileno()).st_size > limit:
            raise TooLarge(f"{path}: larger than {limit} bytes", None, limit)
        read = 0
        while chunk := handle.read(_CHUNK * 8):
            read += len(chunk)
            if read > limit:
                raise TooLarge(f"{path}: larger than {limit} bytes", read, limit)
            digest.update(chunk)
    return digest.hexdigest()


# -- creating files --------------------------------------------------------------------------
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)


def create_exclusive(path: Path, mode: int = 0o666) -> int:
    """Create ``path`` (which must not exist, not even as a dangling link); its descriptor.

    ``O_EXCL`` fails on any existing name, links included (POSIX: with ``O_CREAT|O_EXCL`` a
    symlink is never followed), so nothing is written through a link planted there.
    """
    return os.open(path, _CREATE | getattr(os, "O_CLOEXEC", 0), mode)


def temp_beside(path: Path, mode: int = 0o666) -> tuple[int, Path]:
    """A new, exclusively created temporary file beside ``path``: (descriptor, its path).

    The name carries 64 random bits, not the pid: a folder cannot hold a link for every name.
    """
    for _ in range(100):
        candidate = path.with_name(f".{path.name}.{secrets.token_hex(8)}.tmp")
        try:
            return create_exclusive(candidate, mode), candidate
        except FileExistsError:
            continue
    raise FileExistsError(f"{path}: no free temporary name beside it")


def replace_into(temp: Path, target: Path) -> None:
    """Rename ``temp`` over ``target``, refusing a ``target`` that is a link or not a file.

    A rename never writes through a link (it replaces the name), but a link where xlaprof is to
    keep a file was planted by someone: it is refused, and ``temp`` removed.
    """
    try:
        with contextlib.suppress(FileNotFoundError):
            mode = os.lstat(target).st_mode
            if not stat.S_ISREG(mode):
                what = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
                raise UnsafeFile(f"{target}: {what}; refused")
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def open_owned(path: Path) -> int:
    """Open regular file ``path`` without following a link, if this user owns it; its fd.

    For files xlaprof reuses (caches): one that is a link, or that someone else owns, is
    refused (``UnsafeFile``).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_NOFOLLOW", 0))
    except OSError as error:
        if os.path.islink(path):
            raise UnsafeFile(f"{path}: a symbolic link; refused") from None
        raise error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafeFile(f"{path}: not a regular file")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise UnsafeFile(f"{path}: owned by another user (uid {info.st_uid}); not trusted")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def user_key(folder: Path) -> bytes | None:
    """This user's private key for signing files xlaprof reuses (``folder/key``, mode 0600).

    Made once (exclusively, then linked into place, so concurrent workers agree on one key);
    None when the folder cannot hold one, or when the file found there is not this user's own
    private file: then nothing is trusted, and caches are rebuilt.
    """
    path = folder / "key"
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if not os.path.lexists(path):
            fd, temp = temp_beside(path, 0o600)
            try:
                with os.fdopen(fd, "wb") as handle:
                    handle.write(secrets.token_bytes(32))
                with contextlib.suppress(FileExistsError):
                    os.link(temp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(temp)
        fd = open_owned(path)
        with os.fdopen(fd, "rb") as handle:
            if os.fstat(handle.fileno()).st_mode & 0o077:
                return None
            key = handle.read(64)
    except (OSError, UnsafeFile):
        return None
    return key if len(key) == 32 else None


def gunzip_kept(data: bytes, limit: int, name: str = "data") -> tuple[bytes, bool]:
    """``gunzip_capped``, but a stream cut short (a copy stopped mid-way, a killed writer)
    gives what inflated before the cut and True, so that a reader can keep those records and
    say the file is damaged; any other corruption still raises ``UnsafeFile``."""
    if not data:
        raise UnsafeFile(f"{name}: empty gzip data")
    member = _Member(limit, name, len(data))
    out = bytearray()
    for piece in member.feed(data):
        out += piece
    return bytes(out), not member.ended


def gunzip_capped(data: bytes, limit: int = DEFAULT_GZIP_LIMIT, name: str = "data") -> bytes:
    """Inflate gzip ``data`` (all members), refusing output beyond ``limit`` bytes as it goes.

    ``gzip.decompress`` inflates everything before anyone can look at the size: a few MB of
    zeros become gigabytes. Here each step asks for at most what the limit still allows.
    """
    out, cut = gunzip_kept(data, limit, name)
    if cut:
        raise UnsafeFile(f"{name}: truncated gzip data")
    return out


def iter_gunzip_capped(
    handle: BinaryIO, limit: int, name: str, size: int | None = None
) -> Iterator[bytes]:
    """``gunzip_capped`` as a stream: the inflated bytes of the gzip file open in ``handle``
    (all members, zero padding between them), a piece at a time, refusing output beyond
    ``limit`` bytes as it goes (``size``: the compressed size, for the error)."""
    member = _Member(limit, name, size)
    read_any = False
    while data := handle.read(_CHUNK):
        read_any = True
        yield from member.feed(data)
    if not read_any:
        raise UnsafeFile(f"{name}: empty gzip data")
    if not member.ended:
        raise UnsafeFile(f"{name}: truncated gzip data")


# The compressed bytes handed to zlib at once after a member ended: at least this many, at most
# twice the last member's size (zlib copies what is left after a member's end, so handing it a
# whole chunk per tiny member cost the chunk once per member: quadratic).
_MIN_FEED = 4096


class _Member:
    """The gzip member being inflated, across the pieces of input ``feed`` is given."""

    def __init__(self, limit: int, name: str, size: int | None) -> None:
        self.limit, self.name, self.size = limit, name, size
        self.inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        self.total = 0
        self.ended = False  # after a member's end: zero padding, or another member
        self.member_bytes = 0  # compressed bytes of the member being inflated
        self.step = _CHUNK

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The inflated pieces of the next compressed bytes ``data``."""
        at, end = 0, len(data)
        while at < end:
            piece = data[at : at + self.step]
            if self.ended:
                stripped = piece.lstrip(b"\x00")  # members may be padded with zeros
                at += len(piece) - len(stripped)
                if not stripped:
                    continue
                piece = stripped
                self.inflater, self.ended = zlib.decompressobj(16 + zlib.MAX_WBITS), False
            left = 0
            tail = piece
            while tail:
                try:
                    out = self.inflater.decompress(tail, self.limit - self.total + 1)
                except zlib.error as error:
                    raise UnsafeFile(f"{self.name}: corrupt gzip data ({error})") from None
                self.total += len(out)
                if self.total > self.limit:
                    message = f"{self.name}: inflates to more than {self.limit} bytes"
                    raise TooLarge(message, self.size, self.limit)
                if out:
                    yield out
                if self.inflater.eof:
                    left = len(self.inflater.unused_data)
                    break
                tail = self.inflater.unconsumed_tail
            used = len(piece) - left
            at += used
            self.member_bytes += used
            if self.inflater.eof:
                self.ended = True
                self.step = min(_CHUNK, max(_MIN_FEED, 2 * self.member_bytes))
                self.member_bytes = 0


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
