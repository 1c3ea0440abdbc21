"""Writing a run directory: atomic files, so a reader (or a crash) never sees half of one."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from xlaprof.rundir.schema import RUN_JSON, RunInfo


def _default_mode() -> int:
    # mkstemp creates files 0600; a normal write gives 0666 less the umask. Read the umask
    # without changing it for good.
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


_MODE = _default_mode()


def atomic_write_bytes(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to a temporary file beside ``path``, fsync it, and rename it into place.

    ``durable=False`` skips the fsync: other processes, and this one killed outright, still
    see the old file or the new one whole (the rename is atomic); only a crash of the machine
    itself could lose the new one. The session's once-a-second ``run.json`` uses it: an fsync
    there costs milliseconds of the training thread's time.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable)


def write_info(directory: Path, info: RunInfo, durable: bool = True) -> None:
    """Replace ``run.json`` atomically with ``info`` (see ``atomic_write_bytes``)."""
    atomic_write_text(directory / RUN_JSON, json.dumps(asdict(info), indent=2) + "\n", durable)
