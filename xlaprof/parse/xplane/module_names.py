"""The names XProf's converters turn into file names, checked before ``xlaprof view`` serves.

When its UI first loads a session, XProf (``xprof/convert/xplane_to_hlo.cc``) writes each HLO
module of the captures as ``<session>/<module name>(<program id>).hlo_proto.pb``, the module
name taken as it is from the ``HloProto`` kept in the capture's ``/host:metadata`` plane. A
capture someone sent can name a module ``../../../../home/you/.bashrc``: the converter then
writes outside the logdir, with bytes of the capture. Its tool caches are named after the
capture *files* (which are real names in the folder), so the module names are what can
escape. ``escaping_names`` reads them (the metadata plane only; events stay undecoded) and
returns those that are not a plain file name, so the UI is never started on such a capture.
"""

from __future__ import annotations

from pathlib import Path

from xlaprof.parse.hlo_sources import embedded_hlo_protos
from xlaprof.safeio import DEFAULT_XPLANE_LIMIT, read_capped


def _fields(data: bytes) -> list[tuple[int, int, bytes | int]]:
    """The top-level fields of protobuf ``data``: (number, wire type, value); ``ValueError``
    when it does not parse (then the converter would not read it either)."""
    out: list[tuple[int, int, bytes | int]] = []
    position = 0

    def varint() -> int:
        nonlocal position
        value = shift = 0
        while True:
            if position >= len(data) or shift > 63:
                raise ValueError("truncated varint")
            byte = data[position]
            position += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    while position < len(data):
        key = varint()
        number, kind = key >> 3, key & 7
        if kind == 0:
            out.append((number, kind, varint()))
        elif kind == 2:
            length = varint()
            if position + length > len(data):
                raise ValueError("truncated field")
            out.append((number, kind, data[position : position + length]))
            position += length
        elif kind in (1, 5):
            position += 8 if kind == 1 else 4
        else:
            raise ValueError(f"wire type {kind}")
    return out


def hlo_module_name(hlo_proto: bytes) -> str | None:
    """``HloProto.hlo_module.name`` (fields 1 and 1), without the HLO schema; None if absent."""
    try:
        module = next((v for n, k, v in _fields(hlo_proto) if n == 1 and k == 2), None)
        if not isinstance(module, bytes):
            return None
        name = next((v for n, k, v in _fields(module) if n == 1 and k == 2), None)
    except ValueError:
        return None
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else None


def module_names(path: Path, limit: int = DEFAULT_XPLANE_LIMIT) -> list[str]:
    """The HLO module names in one ``.xplane.pb``'s metadata plane (read with the size cap)."""
    from xlaprof.parse.xplane.schema import message_class, parse_space

    data = read_capped(path, limit)
    space = parse_space(path, data, message_class("XSpace", events_as_bytes=True))
    names = (hlo_module_name(proto) for _, proto in embedded_hlo_protos(space))
    return [name for name in names if name is not None]


def unsafe(name: str) -> bool:
    """Whether ``name`` is not one plain file name (a separator, a NUL, a parent step)."""
    return "/" in name or "\\" in name or "\x00" in name or name in (".", "..")


def escaping_names(files: list[Path]) -> dict[Path, list[str]]:
    """For each capture among ``files`` whose module names would escape: those names."""
    found = {}
    for path in files:
        bad = [name for name in module_names(path) if unsafe(name)]
        if bad:
            found[path] = bad
    return found
