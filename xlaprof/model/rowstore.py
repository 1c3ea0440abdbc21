"""A row store: per-step tables kept in files, named by the finished result.

A pod's per-step tables (device steps, host vs device, the straggler rows, bottlenecks, host
step bounds) grow with hosts x steps, so its workers leave them in Parquet files beside each
host's event cache (``xlaprof.inputs.pod``). The finished result does not hold a live
event source to read them through: it names them here, per table, host by host, each with its
file (or, where no file could be written, the rows themselves), the name the file gives its
host, and how many rows it has. Anyone holding the result (the notebook facade, the MCP tools
paging through every row) reads the rows they ask for with ``read``; nothing else is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

# The table whose host column is categorical when read (as ``Trace.step_bounds`` holds it).
_CATEGORICAL_HOSTS = "step_bounds"


@dataclass(frozen=True)
class HostRows:
    """One host's rows of one stored table: its Parquet file (``path``), or the rows held
    where no file could be written (``frame``); the host name the file holds
    (``stored_host``: a host renamed apart from another of the same name reads as ``host``);
    and how many rows it has (None where its worker did not count them)."""

    host: str
    path: str | None
    stored_host: str
    rows: int | None
    frame: pd.DataFrame | None = field(default=None, repr=False, compare=False)

    def read(self, columns: list[str] | None, filters: Any) -> pd.DataFrame:
        """This host's rows (``columns`` of them, those ``filters`` keep: pyarrow's), its host
        column naming it."""
        import pyarrow.parquet as pq

        if self.frame is not None:
            frame = self.frame
            if filters is not None:
                import pyarrow as pa

                if isinstance(filters, list):
                    filters = pq.filters_to_expression(filters)
                frame = pa.Table.from_pandas(frame, preserve_index=False).filter(filters)
                frame = frame.to_pandas()
            frame = frame[columns] if columns else frame
        elif self.path is not None:
            frame = pq.read_table(self.path, columns=columns, filters=filters).to_pandas()
        else:
            import pandas as pd

            frame = pd.DataFrame(columns=columns)
        if "host" in frame and self.stored_host != self.host:
            frame["host"] = self.host
        return frame


@dataclass(frozen=True)
class RowStore:
    """Stored per-step tables by name (``xlaprof.model.ondisk.TABLES``), each host's rows in
    host order. Empty for a result whose every row is in memory."""

    tables: dict[str, list[HostRows]] = field(default_factory=dict)

    def __contains__(self, name: object) -> bool:
        return name in self.tables

    def names(self) -> list[str]:
        return sorted(self.tables)

    def count(self, name: str) -> int:
        """How many rows table ``name`` has over every host, nothing read (0: not stored)."""
        return sum(h.rows or 0 for h in self.tables.get(name, []))

    def hosts_of(self, name: str, hosts: list[str] | None = None) -> list[HostRows]:
        """The hosts' rows of table ``name`` (``hosts`` only, where given), hosts in order."""
        chosen = self.tables.get(name, [])
        if hosts is not None:
            wanted = set(hosts)
            chosen = [h for h in chosen if h.host in wanted]
        return chosen

    def read(
        self,
        name: str,
        hosts: list[str] | None = None,
        columns: list[str] | None = None,
        filters: Any = None,
    ) -> pd.DataFrame:
        """Rows of table ``name`` of ``hosts`` (every host by default), hosts in order;
        ``columns`` and pyarrow ``filters`` apply while each host's file is read."""
        import pandas as pd

        frames = [h.read(columns, filters) for h in self.hosts_of(name, hosts)]
        kept = [f for f in frames if len(f)] or frames[:1]
        if not kept:
            return pd.DataFrame(columns=columns)
        frame = pd.concat(kept, ignore_index=True) if len(kept) > 1 else kept[0]
        if name == _CATEGORICAL_HOSTS and "host" in frame:
            frame["host"] = frame["host"].astype(str).astype("category")
        return frame

    def head(self, name: str, rows: int) -> pd.DataFrame:
        """The first ``rows`` rows of table ``name``, hosts in order: only the hosts they are
        in are read (and the first host for the columns, when no host has a row)."""
        import pandas as pd

        stored = self.hosts_of(name)
        frames: list[pd.DataFrame] = []
        count = 0
        for host in stored:
            if count >= rows:
                break
            if host.rows == 0:
                continue
            frame = host.read(None, None).head(rows - count)
            frames.append(frame)
            count += len(frame)
        if not frames and stored:
            frames = [stored[0].read(None, None).head(0)]
        if not frames:
            return pd.DataFrame()
        return pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]

    def to_json(self) -> dict[str, Any]:
        """Where each table's rows are, per host (a host's held rows are not written)."""
        return {
            name: [
                {"host": h.host, "path": h.path, "stored_host": h.stored_host, "rows": h.rows}
                for h in hosts
            ]
            for name, hosts in self.tables.items()
        }
