"""How an analysing command's own process asks for memory and has it collected: page faults
are a quarter or more of a capture's analysis, so the commands that analyse one request
(``analyze``, ``report``) tune three process-wide settings before they read anything. A library
caller's process is left as it is: these are set only from ``cli.common.analyzed``.

- ``small_pages``: numpy stops asking the kernel for huge pages (see there).
- ``frozen_start``: the objects made to get this far (the modules imported: click, numpy,
  xlaprof's own; tens of thousands) are moved out of the cyclic garbage collector's sight
  (``gc.freeze``): they live as long as the process, yet each of its full passes walked them
  all. An 80 MB capture's ``analyze --json``, alternating runs on one core: CPU 1.55-1.65 s
  (median 1.60) -> 1.48-1.58 (1.51), the collector's share of the samples 6.4 % -> 4.0 %, peak
  memory +6 MB (515 -> 521 MB).
- ``keep_freed_memory``: for inputs of up to ``KEEP_FREED_UP_TO`` bytes in all, glibc's malloc
  serves every block from its heap and keeps what is freed for the next block, rather than
  mapping each block over 32 MB afresh and unmapping it on free. A fresh page costs a fault
  (~2 us here, zeroing included) each time it is first written, and an analysis makes and frees
  many row-long arrays: on synthesized hosts of 80, 120 and 250 MB (``analyze --json``, one
  core) the faults fall 203k -> 135k, 460k -> 176k and 1.16 M -> 349k, system time 0.46 -> 0.31,
  0.86 -> 0.40 and 2.2 -> 0.76 s, peak memory the same, +3 % and +7 %. Above the cap the peak
  matters more than the time: a 1 GB host's peak grew by 17 % (4.54 -> 5.34 GB: freed holes the
  heap cannot give back) for 5 s less system time, so large inputs keep glibc's own way.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterable
from pathlib import Path

# The inputs' bytes in all up to which freed memory is kept for reuse (see the module's note).
KEEP_FREED_UP_TO = 512 * 1024 * 1024

# Directory entries looked at before an input counts as over the cap (a walk stays short).
_MOST_ENTRIES = 20_000

# glibc's mallopt parameter: the most blocks served by mmap at once (0: none, all from the heap).
_M_MMAP_MAX = -4

# What a user sets for glibc's malloc themselves: then their choice stands.
_MALLOC_SETTINGS = (
    "GLIBC_TUNABLES",
    "MALLOC_MMAP_MAX_",
    "MALLOC_MMAP_THRESHOLD_",
    "MALLOC_TRIM_THRESHOLD_",
    "MALLOC_TOP_PAD_",
)


def small_pages() -> None:
    """Have numpy stop asking the kernel for huge pages in this process (unless the user chose,
    by ``NUMPY_MADVISE_HUGEPAGE``): where the kernel compacts memory to find them on first
    touch (``transparent_hugepage/defrag`` = madvise, a common default), an 80 MB capture's
    analysis spent ~0.9 s of system time there, more than its decoding (busy 2-core VM;
    benchmarks/README.md)."""
    if "NUMPY_MADVISE_HUGEPAGE" in os.environ:
        return
    import numpy

    setting = getattr(getattr(numpy, "_core", None), "multiarray", None)
    switch = getattr(setting, "_set_madvise_hugepage", None)
    if switch is not None:
        switch(False)


def frozen_start() -> None:
    """Have the cyclic garbage collector pass over every object made so far for good
    (``gc.freeze``; see the module's note). Objects made after are collected as before."""
    import gc

    gc.freeze()


def keep_freed_memory(inputs: Iterable[Path]) -> bool:
    """Have glibc's malloc keep freed memory for reuse in this process where ``inputs`` hold
    ``KEEP_FREED_UP_TO`` bytes or fewer (see the module's note); whether it now does. Nothing
    changes off glibc, or where the user set glibc's malloc options themselves."""
    if any(name in os.environ for name in _MALLOC_SETTINGS) or platform.libc_ver()[0] != "glibc":
        return False
    if input_bytes(inputs, KEEP_FREED_UP_TO) > KEEP_FREED_UP_TO:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_MAX, 0))


def input_bytes(inputs: Iterable[Path], stop_over: int) -> int:
    """The bytes of the files ``inputs`` name, a folder's counted by every file under it; the
    count stops once it is over ``stop_over``, and an input that cannot be looked at, or a
    folder of more than ``_MOST_ENTRIES`` entries, counts as ``stop_over + 1``: unknown is
    taken as large."""
    total, entries = 0, 0
    for path in inputs:
        try:
            if not path.is_dir():
                total += path.stat().st_size
            else:
                for folder, names, files in os.walk(path, onerror=_raise):
                    entries += len(names) + len(files)
                    if entries > _MOST_ENTRIES:
                        return stop_over + 1
                    for name in files:
                        total += _size(os.path.join(folder, name))
                        if total > stop_over:
                            return total
        except OSError:
            return stop_over + 1
        if total > stop_over:
            return total
    return total


def _size(path: str) -> int:
    """A file's size, a link's target's (0 for a dangling link or anything else not a file)."""
    try:
        return os.stat(path).st_size if os.path.isfile(path) else 0
    except OSError:
        return 0


def _raise(error: OSError) -> None:
    raise error
