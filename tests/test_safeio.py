"""``safeio.read_capped``: a capped read that asks for the size it found, not for the cap;
``read_capped_mapped``: the same bytes in an anonymous map of their own."""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path
from typing import Any

import hypothesis
import pytest
from hypothesis import strategies as st

from xlaprof import safeio
from xlaprof.safeio import TooLarge, read_capped, read_capped_mapped


def test_a_file_under_the_cap_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "capture.bin"
    path.write_bytes(bytes(range(256)) * 1000)
    assert read_capped(path, 1 << 31) == bytes(range(256)) * 1000
    assert read_capped(path, 256_000) == bytes(range(256)) * 1000  # exactly at the cap


def test_a_file_over_the_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "capture.bin"
    path.write_bytes(b"x" * 1001)
    with pytest.raises(TooLarge):
        read_capped(path, 1000)


def _size_said(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Every open file says it holds ``size`` bytes (a size asked before the file grew)."""
    real_fstat = os.fstat

    class Older:
        def __init__(self, result: Any) -> None:
            self.result = result

        def __getattr__(self, name: str) -> Any:
            return size if name == "st_size" else getattr(self.result, name)

    monkeypatch.setattr(safeio.os, "fstat", lambda fd: Older(real_fstat(fd)))


@pytest.mark.parametrize(("size", "limit", "whole"), [(1000, 5000, True), (1000, 1500, False)])
def test_a_file_that_grew_after_its_size_was_asked_is_read_to_the_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: int, limit: int, whole: bool
) -> None:
    """The size asked of the open file is older than its bytes (a capture still being
    written): what grew since is read too, and the cap still holds."""
    path = tmp_path / "capture.bin"
    path.write_bytes(b"y" * 2000)
    _size_said(monkeypatch, size)
    if whole:
        assert read_capped(path, limit) == b"y" * 2000
    else:
        with pytest.raises(TooLarge):
            read_capped(path, limit)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(st.binary(max_size=3 * 4096), st.integers(0, 4 * 4096))
def test_a_mapped_read_holds_the_files_bytes_or_refuses_as_the_read_does(
    tmp_path_factory: pytest.TempPathFactory, content: bytes, limit: int
) -> None:
    """Any file, any cap: the map holds exactly the file's bytes (a map of its own, writable:
    not the file's pages), or it is refused as ``read_capped`` refuses it."""
    path = tmp_path_factory.mktemp("mapped") / "capture.bin"
    path.write_bytes(content)
    if len(content) > limit:
        with pytest.raises(TooLarge):
            read_capped_mapped(path, limit)
        return
    found = read_capped_mapped(path, limit)
    assert bytes(found) == content == read_capped(path, limit)
    if content:  # an empty file is bytes: there is nothing to map
        assert not isinstance(found, bytes)
        if sys.platform.startswith("linux"):  # private: pages given back are freed
            assert _mapping_flags(found).endswith("p")
        found[0] = (content[0] + 1) % 256  # its own memory: the file stays as it was
        assert path.read_bytes() == content


def _mapping_flags(mapped: Any) -> str:
    """The permissions /proc/self/maps gives the mapping that holds ``mapped``'s buffer
    (``rw-p``: private; ``rw-s``: shared, whose pages given back stay held by the object)."""
    view = (ctypes.c_char * len(mapped)).from_buffer(mapped)
    address = ctypes.addressof(view)
    del view
    for line in Path("/proc/self/maps").read_text().splitlines():
        span, flags = line.split()[:2]
        low, high = (int(part, 16) for part in span.split("-"))
        if low <= address < high:
            return flags
    raise AssertionError("no mapping holds the buffer")


def test_a_mapped_read_of_a_file_that_changed_size_is_the_plain_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file longer than its size said (still being written): the bytes read as
    ``read_capped`` reads them, up to the cap, rather than a map cut at the old size."""
    path = tmp_path / "capture.bin"
    path.write_bytes(b"z" * 3000)
    _size_said(monkeypatch, 1000)
    found = read_capped_mapped(path, 5000)
    assert isinstance(found, bytes) and found == b"z" * 3000


_TEXT = b"".join(b'V1202 record %d {"k": %d}\n' % (i, i * i) for i in range(400))
_PACKED = __import__("gzip").compress(_TEXT)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(st.integers(min_value=0, max_value=len(_PACKED)), st.binary(max_size=64))
def test_a_gzip_stream_cut_anywhere_keeps_a_prefix_or_says_why(cut: int, tail: bytes) -> None:
    # GIVEN a gzip stream cut at any byte, sometimes with junk after the cut
    data = _PACKED[:cut] + (tail if cut < len(_PACKED) // 2 else b"")
    # WHEN it is inflated as a reader of a copied log does
    try:
        out, was_cut = safeio.gunzip_kept(data, limit=len(_TEXT) * 2, name="log.gz")
    except (safeio.UnsafeFile, TooLarge) as error:
        assert str(error).startswith("log.gz")  # one line naming the file, never a traceback
        return
    # THEN what it kept is the start of the log, and a cut stream says it was cut
    if not tail or cut == len(_PACKED):
        assert _TEXT.startswith(out)
    assert was_cut or out == _TEXT or tail
