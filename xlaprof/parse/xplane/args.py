"""The ``args`` column of an XSpace frame, decoded on demand: ``ArgsArray``.

Building a dict of its own stats for every event is a good part of a capture's load (about half a
second at a million events, 485 thousand dicts on a JAX CPU capture), yet the analysis reads only
a few stats of a few events (``cat``, ``tf_op``, ``name``, ``group_id``). So the frame's ``args``
column is a pandas extension array (``pandas.api.extensions``) over the decoded stats themselves:
a row is its event's place in an ``EventStats`` table (-1: no stats), and a dict is made
when a row is read (``.iloc``, iteration, ``tolist``, ``map``, ``to_numpy``), once per event,
then kept: reading every row builds the dicts the eager decoder built, in one vectorized pass,
and costs what it cost. ``stat_values`` reads one stat per row without a dict, converting each
distinct value once; on a plain object column (Chrome and Kineto frames) it calls ``get`` per row.

Selections, ``take``, ``copy`` and ``pd.concat`` move row numbers only; a concat of several
captures' columns (several hosts) chains their tables (``Chain``), and values set into the
column (``__setitem__``) or made from a sequence are held as they are (``Objects``). A pickle
holds the stats, not the dicts (hosts load in worker processes).
"""

from __future__ import annotations

import builtins
import gc
from collections.abc import Iterator, Sequence
from typing import Any, Protocol, Self

import numpy as np
import pandas as pd
from pandas.api.extensions import ExtensionArray, ExtensionDtype, register_extension_dtype

from xlaprof.parse.xplane.wire import StatValues


class Table(Protocol):
    """What ``ArgsArray`` reads its rows from: per row number (-1: None), the row's dict, one
    stat of it, and whether it is missing."""

    def __len__(self) -> int: ...

    def dicts(self, rows: np.ndarray) -> np.ndarray: ...

    def stat(self, rows: np.ndarray, key: str) -> np.ndarray: ...

    def isna(self, rows: np.ndarray) -> np.ndarray: ...

    @property
    def nbytes(self) -> int: ...

    @property
    def made(self) -> int: ...


class EventStats:
    """The events' own stats, as decoded (``wire.Stats`` rows, in event order then wire
    order), for the events that have any: ``first_stat[e]:first_stat[e + 1]`` are the rows of
    the e-th of them, ``stat_name`` each row's name (an index in ``values.names``). Dicts are
    made per event when first asked for, then kept (so a row reads as the same dict each time,
    as an object column's does)."""

    def __init__(
        self,
        first_stat: np.ndarray,
        stat_name: np.ndarray,
        values: StatValues,
        kept: frozenset[str] | None = None,
    ) -> None:
        """``kept``: the names of the only stats these rows hold (None: every stat of each
        event); a read of any other by name is an error, not a None that looks like its
        absence."""
        self.first_stat = first_stat
        self.stat_name = stat_name
        self.values = values
        self.kept = kept
        self._made: np.ndarray | None = None  # per event, its dict (a last slot: None for -1)
        self._done: np.ndarray | None = None  # per event, whether _made holds it
        self.made = 0  # events whose dict has been made

    @classmethod
    def of_events(
        cls,
        first_stat: np.ndarray,
        stat_name: np.ndarray,
        values: StatValues,
        kept: frozenset[str] | None = None,
    ) -> tuple[EventStats, np.ndarray]:
        """The table of the decoded stats (``Stats`` with ``first_stat``, their names
        ``stat_name``; ``values`` reads them, kept as given: the frame gives them slim,
        ``StatValues.slim``) and, per event, its row there (-1: no stats), which an
        ``ArgsArray`` of the events holds. ``kept``: the names of the only stats given (see
        ``__init__``), None where every one is."""
        # The table holds the events that have stats alone (with ``kept``, most have none of
        # them: a 1 GB host's 46 M events, a few thousand), and an event's row is its place
        # there. Both int32 where their numbers fit (every capture short of 2**31 events and
        # stats): 8 bytes an event less in the frame than as intp.
        small = np.iinfo(np.int32).max
        fits = first_stat[-1] <= small and len(first_stat) - 1 <= small
        width = np.int32 if fits else np.intp
        has = first_stat[1:] != first_stat[:-1]
        owners = np.flatnonzero(has)
        bounds = np.empty(len(owners) + 1, width)
        bounds[:-1] = first_stat[owners]
        bounds[-1] = first_stat[-1]
        del owners
        place: np.ndarray = np.cumsum(has, dtype=width)  # each event with stats: its place + 1
        np.subtract(place, 1, out=place)
        place[~has] = -1
        return cls(bounds, stat_name, values, kept), place

    def __len__(self) -> int:
        return len(self.first_stat) - 1

    @property
    def nbytes(self) -> int:
        stats = self.values.stats
        return sum(
            a.nbytes
            for a in (self.first_stat, self.stat_name, stats.kind, stats.raw, self.values.ref_name)
        )

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_made": None, "_done": None, "made": 0}  # not the dicts

    def isna(self, rows: np.ndarray) -> np.ndarray:
        result: np.ndarray = rows < 0  # (every event here has stats)
        return result

    def stat(self, rows: np.ndarray, key: str) -> np.ndarray:
        """Per row, its event's stat ``key`` (of two of that name, the last), None where the
        event has none: as ``dict.get`` on its dict."""
        if self.kept is not None and key not in self.kept:
            raise KeyError(f"stat {key!r} is not kept in these args (only {sorted(self.kept)})")
        out = np.full(len(rows), None, object)
        try:
            code = self.values.names.index(key)
        except ValueError:
            return out
        # (found as first_stat's own type: searchsorted would cast the longer array to it)
        found = np.flatnonzero(self.stat_name == code).astype(self.first_stat.dtype, copy=False)
        owners = np.searchsorted(self.first_stat, found, side="right") - 1
        last = np.append(owners[1:] != owners[:-1], True)
        found, owners = found[last], owners[last]
        if not len(found):
            return out
        at = np.minimum(np.searchsorted(owners, rows), len(owners) - 1)
        hit = np.flatnonzero(owners[at] == rows)  # rows of -1 never match an event
        out[hit] = self.values.objects(found[at[hit]])
        return out

    def dicts(self, rows: np.ndarray) -> np.ndarray:
        """Per row, its event's dict (made now where not made yet), None for -1."""
        if self._made is None or self._done is None:
            self._made = np.full(len(self) + 1, None, object)
            self._done = np.append(self.first_stat[1:] == self.first_stat[:-1], True)
        wanted = np.zeros(len(self) + 1, bool)
        wanted[rows] = True
        wanted &= ~self._done
        events = np.flatnonzero(wanted)
        if len(events):
            # Hundreds of thousands of new dicts of plain values: none can be in a reference
            # cycle, so the cycle collector, which their allocations would set off again and
            # again, is held off.
            collecting = gc.isenabled()
            gc.disable()
            try:
                self._make(events)
            finally:
                if collecting:
                    gc.enable()
            self._done[events] = True
            self.made += len(events)
        result: np.ndarray = self._made[rows]
        return result

    def _make(self, events: np.ndarray) -> None:
        """The dicts of ``events`` (each with stats) into ``_made``: name -> value, of two with
        one name the last value in the first one's place (as a dict made from the pairs).

        Events are taken by their number of stats, so that each dict is made by one display (the
        common small sizes) rather than a loop over its stats.
        """
        assert self._made is not None
        first = self.first_stat[events]
        sizes = self.first_stat[events + 1] - first
        begins = np.cumsum(sizes) - sizes  # where each event's stats begin in ``stats``
        stats = np.arange(int(sizes.sum())) + np.repeat(first - begins, sizes)
        keys = np.array(self.values.names, object)[self.stat_name[stats]]
        items = self.values.objects(stats)
        for size in np.flatnonzero(np.bincount(sizes)).tolist():
            chosen = np.flatnonzero(sizes == size)
            at = begins[chosen][:, None] + np.arange(size)
            k, v = keys[at].T.tolist(), items[at].T.tolist()
            if size == 1:
                made = [{a: x} for a, x in zip(k[0], v[0], strict=True)]
            elif size == 2:
                made = [{a: x, b: y} for a, x, b, y in zip(k[0], v[0], k[1], v[1], strict=True)]
            else:
                made = list(map(dict, map(zip, zip(*k, strict=True), zip(*v, strict=True))))
            self._made[events[chosen]] = made


class Objects:
    """Rows held as the values themselves (an object array): values set into the column, or an
    array made from a sequence."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = np.empty(len(values) + 1, object)  # a last slot: None for -1
        self.values[:-1] = values

    def __len__(self) -> int:
        return len(self.values) - 1

    @property
    def nbytes(self) -> int:
        return int(self.values.nbytes)

    @property
    def made(self) -> int:
        return 0  # held as they came

    def dicts(self, rows: np.ndarray) -> np.ndarray:
        result: np.ndarray = self.values[rows]
        return result

    def stat(self, rows: np.ndarray, key: str) -> np.ndarray:
        return _each_get(self.values[rows], key)

    def isna(self, rows: np.ndarray) -> np.ndarray:
        result: np.ndarray = pd.isna(self.values)[rows]
        return result


class Chain:
    """Tables one after another (the columns of several captures concatenated): row r of the
    chain is row ``r - start`` of the table it falls in."""

    def __init__(self, tables: list[Table]) -> None:
        self.tables = tables
        self.starts = np.cumsum([0, *(len(table) for table in tables)])

    def __len__(self) -> int:
        return int(self.starts[-1])

    @property
    def nbytes(self) -> int:
        return sum(table.nbytes for table in self.tables)

    @property
    def made(self) -> int:
        return sum(table.made for table in self.tables)

    def _split(self, rows: np.ndarray) -> Iterator[tuple[Table, np.ndarray, np.ndarray]]:
        """Per table, the positions in ``rows`` that fall in it and their rows there."""
        which = np.searchsorted(self.starts, rows, side="right") - 1
        for number, table in enumerate(self.tables):
            chosen = np.flatnonzero((which == number) & (rows >= 0))
            if len(chosen):
                yield table, chosen, rows[chosen] - self.starts[number]

    def dicts(self, rows: np.ndarray) -> np.ndarray:
        out = np.full(len(rows), None, object)
        for table, chosen, inner in self._split(rows):
            out[chosen] = table.dicts(inner)
        return out

    def stat(self, rows: np.ndarray, key: str) -> np.ndarray:
        out = np.full(len(rows), None, object)
        for table, chosen, inner in self._split(rows):
            out[chosen] = table.stat(inner, key)
        return out

    def isna(self, rows: np.ndarray) -> np.ndarray:
        out = np.ones(len(rows), bool)
        for table, chosen, inner in self._split(rows):
            out[chosen] = table.isna(inner)
        return out


@register_extension_dtype
class ArgsDtype(ExtensionDtype):
    """The dtype of ``ArgsArray``: values are dicts (an event's stats) or None."""

    name = "xlaprof.args"
    type = dict
    na_value = None
    kind = "O"

    @classmethod
    def construct_array_type(cls) -> builtins.type[ArgsArray]:
        return ArgsArray


class ArgsArray(ExtensionArray):
    """An ``args`` column decoded on demand (see the module docstring): row numbers into a
    ``Table`` (int32 where a capture's events are read, intp once moved), -1 for None."""

    def __init__(self, table: Table, rows: np.ndarray) -> None:
        self._table = table
        self._rows = rows

    # -- what pandas asks of an extension array ------------------------------------------------
    @classmethod
    def _from_sequence(cls, scalars: Any, *, dtype: Any = None, copy: bool = False) -> ArgsArray:
        if isinstance(scalars, ArgsArray):
            return scalars.copy()
        items = list(scalars)
        values = np.fromiter(items, dtype=object, count=len(items))
        return cls(Objects(values), np.arange(len(values), dtype=np.intp))

    @classmethod
    def _from_factorized(cls, values: Any, original: Any) -> ArgsArray:
        return cls._from_sequence(values)

    @classmethod
    def _from_scalars(cls, scalars: Any, *, dtype: Any) -> ArgsArray:
        if not all(value is None or isinstance(value, dict) for value in scalars):
            raise TypeError("an args column holds dicts and None")
        return cls._from_sequence(scalars)

    def _cast_pointwise_result(self, values: Any) -> Any:
        """What ``map`` and ``apply`` give: the values as pandas infers them for an object
        column (``map_array`` has inferred them), not an args column."""
        return values

    @property
    def dtype(self) -> ArgsDtype:
        return ArgsDtype()

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def nbytes(self) -> int:
        return int(self._rows.nbytes) + self._table.nbytes

    def __getitem__(self, item: Any) -> Any:
        if pd.api.types.is_integer(item):
            return self._table.dicts(np.array([self._rows[item]], np.intp))[0]
        item = pd.api.indexers.check_array_indexer(self, item)
        return type(self)(self._table, self._rows[item])

    def __setitem__(self, key: Any, value: Any) -> None:
        """Values set are held as they are: the column's rows become an object array."""
        if getattr(self, "_readonly", False):  # pandas 3.1's flag (not in its stubs)
            raise ValueError("Cannot modify read-only array")
        if isinstance(value, ArgsArray):
            value = value.to_objects()
        if not pd.api.types.is_integer(key):
            key = pd.api.indexers.check_array_indexer(self, key)
        values = self.to_objects()
        values[key] = value
        self._table = Objects(values)
        self._rows = np.arange(len(values), dtype=np.intp)

    def __iter__(self) -> Iterator[Any]:
        return iter(self.to_objects().tolist())

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        values = self.to_objects()
        return values if dtype is None else np.asarray(values, dtype=dtype)

    def __eq__(self, other: object) -> Any:
        """Row by row, as pandas compares an object column of the same dicts (None equals
        nothing, not even None)."""
        if isinstance(other, pd.Series | pd.Index | pd.DataFrame):
            return NotImplemented  # pandas aligns, then compares the arrays
        if isinstance(other, ArgsArray):
            other = other.to_objects()
        mine = pd.Series(self.to_objects(), dtype=object, copy=False)
        return (mine == other).to_numpy(dtype=bool)

    def tolist(self) -> list[Any]:
        result: list[Any] = self.to_objects().tolist()
        return result

    def isna(self) -> np.ndarray:
        return self._table.isna(self._rows)

    def take(self, indexer: Any, *, allow_fill: bool = False, fill_value: Any = None) -> Self:
        indices = np.asarray(indexer, dtype=np.intp)
        if allow_fill and fill_value is not None and not pd.isna(fill_value):
            # A dict to fill with: held as it is.
            values = np.asarray(
                pd.api.extensions.take(
                    self.to_objects(), indices, allow_fill=True, fill_value=fill_value
                ),
                dtype=object,
            )
            return type(self)(Objects(values), np.arange(len(values), dtype=np.intp))
        rows = np.asarray(
            pd.api.extensions.take(self._rows, indices, allow_fill=allow_fill, fill_value=-1),
            dtype=np.intp,
        )
        return type(self)(self._table, rows)

    def copy(self) -> Self:
        return type(self)(self._table, self._rows.copy())

    @classmethod
    def _concat_same_type(cls, to_concat: Sequence[Self]) -> Self:
        """The rows one after another; columns over several tables chain them."""
        tables: list[Table] = []
        for array in to_concat:
            parts = array._table.tables if isinstance(array._table, Chain) else [array._table]
            tables.extend(table for table in parts if all(table is not t for t in tables))
        if len(tables) == 1:
            return cls(tables[0], np.concatenate([array._rows for array in to_concat]))
        chain = Chain(tables)
        starts = {id(table): int(start) for table, start in zip(tables, chain.starts, strict=False)}
        pieces = [cls._rows_in(array, starts, chain) for array in to_concat]
        return cls(chain, np.concatenate(pieces) if pieces else np.zeros(0, np.intp))

    @staticmethod
    def _rows_in(array: ArgsArray, starts: dict[int, int], chain: Chain) -> np.ndarray:
        """``array``'s rows as rows of ``chain`` (which holds its table or tables)."""
        rows = array._rows
        if isinstance(array._table, Chain):
            # Its own chain's tables are in the new chain: move each row to its table's start.
            old = array._table
            which = np.searchsorted(old.starts, rows, side="right") - 1
            shift = np.array(
                [starts[id(table)] - int(old.starts[i]) for i, table in enumerate(old.tables)],
                np.intp,
            )
            moved = rows + shift[np.clip(which, 0, len(shift) - 1)]
        else:
            moved = rows + starts[id(array._table)]
        result: np.ndarray = np.where(rows >= 0, moved, -1)
        return result

    # -- xlaprof's own ----------------------------------------------------------------------------
    def to_objects(self) -> np.ndarray:
        """The rows as an object array of dicts and None (made where not made yet)."""
        return self._table.dicts(self._rows)

    def stat(self, key: str) -> np.ndarray:
        """Per row, its stat ``key`` (None where absent), without making the rows' dicts."""
        return self._table.stat(self._rows, key)

    def dicts_made(self) -> int:
        """How many events of the stats under this column have their dict made so far (by
        reading rows of this column or of another over the same stats)."""
        return self._table.made


def stat_values(column: Any, key: str) -> np.ndarray:
    """Per row of an ``args`` column (a Series or array), its stat ``key``, None where the row
    has none: ``ArgsArray.stat`` on an XSpace frame's, ``get`` per row on an object column."""
    values = getattr(column, "array", column)
    if isinstance(values, ArgsArray):
        return values.stat(key)
    return _each_get(np.asarray(column, dtype=object), key)


def _each_get(values: np.ndarray, key: str) -> np.ndarray:
    """``value.get(key)`` per dict of an object array, None for anything else."""
    found = (a.get(key) if isinstance(a, dict) else None for a in values.tolist())
    return np.fromiter(found, dtype=object, count=len(values))
