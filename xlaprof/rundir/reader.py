"""Reading a run directory (``Run``): typed rows for analysis, DataFrames for notebooks.

Everything here is plain files read without torch or torch_xla, so a run captured on a TPU VM is
analyzed anywhere. A cut last line of a JSON-lines file (a killed writer) is ignored.
"""

from __future__ import annotations

import bisect
import json
import logging
import os
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import RunDirError
from xlaprof.parse.debug_log import DebugEvent, DebugLog, parse_debug_log
from xlaprof.parse.metrics_report import MetricsReport, parse_metrics_report
from xlaprof.rundir.schema import (
    DEBUG_LOG,
    DYNAMO,
    FALLBACK_LOG,
    GRAPH_INDEX,
    GRAPHS_DIR,
    METRICS_DIR,
    MODULES,
    REGIONS,
    RUN_JSON,
    SAMPLES,
    SCHEMA_VERSION,
    STEPS,
    TRACE_DIR,
    GraphInfo,
    RunInfo,
    StepRow,
)

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import pandas as pd


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Read a JSON-lines file; a cut last line (a killed writer) is dropped, not an error."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as error:
            log.debug("%s: line skipped (%s): %.80r", path, error, line)
            continue
    return rows


def _step_row(data: dict[str, Any]) -> StepRow:
    known = {f.name for f in fields(StepRow)}
    return StepRow(**{k: v for k, v in data.items() if k in known})


@dataclass
class Run:
    """A loaded run directory. DataFrame accessors are for notebooks; analyzers use the rows."""

    path: Path
    info: RunInfo
    # Parsed files, read once: a loaded Run is a snapshot of its directory.
    _cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # -- typed data --------------------------------------------------------------------------
    def step_rows(self) -> list[StepRow]:
        if "steps" not in self._cache:
            self._cache["steps"] = [_step_row(row) for row in read_jsonl(self.path / STEPS)]
        return self._cache["steps"]

    def debug_log(self) -> DebugLog:
        """Debug analysis and fallback records, each event tagged with the step it fell in."""
        if "debug_log" not in self._cache:
            self._cache["debug_log"] = self._read_debug_log()
        return self._cache["debug_log"]

    def _read_debug_log(self) -> DebugLog:
        log = DebugLog()
        rows = self.step_rows()
        for name, offset_key in ((DEBUG_LOG, "debug_offset"), (FALLBACK_LOG, "fallback_offset")):
            path = self.path / name
            if not path.exists():
                continue
            raw = path.read_bytes()
            parsed = parse_debug_log(raw.decode("utf-8", errors="replace"))
            ends = [getattr(r, offset_key) for r in rows]
            line_starts = _line_offsets(raw)
            if all(isinstance(e, int) for e in ends) and ends:
                for event in parsed.events:
                    event.step = _step_at(line_starts, event.line, ends, rows)
                for record in parsed.fallbacks:
                    record.step = _step_at(line_starts, record.line, ends, rows)
            log.merge(parsed)
        return log

    def metrics_reports(self) -> list[MetricsReport]:
        reports: list[MetricsReport] = []
        directory = self.path / METRICS_DIR
        if directory.is_dir():
            for path in sorted(directory.glob("*.txt")):
                reports.extend(parse_metrics_report(path.read_text(errors="replace")).reports)
        return reports

    def regions(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path / REGIONS)

    def host_samples(self) -> list[dict[str, Any]]:
        """Per step: ``{"step": n, "samples": {"file:line" | "<library>": CPU seconds}}``."""
        return read_jsonl(self.path / SAMPLES)

    def dynamo_records(self) -> list[dict[str, Any]]:
        """torch.compile's recompiles, graph breaks and compiles (``dynamo.jsonl``), in order."""
        return read_jsonl(self.path / DYNAMO)

    def modules(self) -> dict[str, Any] | None:
        """The module stacks and repeated module calls of one step (``modules.json``)."""
        try:
            data = json.loads((self.path / MODULES).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def graph_index(self) -> list[dict[str, Any]]:
        """One entry per compiled module, in compile order: module, step, file (or skipped)."""
        return read_jsonl(self.path / GRAPHS_DIR / GRAPH_INDEX)

    def graph_text(self, entry: dict[str, Any]) -> str | None:
        import gzip

        if not entry.get("file"):
            return None
        return gzip.decompress((self.path / GRAPHS_DIR / entry["file"]).read_bytes()).decode()

    def trace_files(self) -> list[Path]:
        return sorted((self.path / TRACE_DIR).glob("*/*.xplane.pb"))

    def graphs(self) -> list[GraphInfo]:
        """Every compiled graph, parsed, in compile order."""
        if "graphs" not in self._cache:
            self._cache["graphs"] = self._read_graphs()
        return self._cache["graphs"]

    def _read_graphs(self) -> list[GraphInfo]:
        from xlaprof.parse.hlo import parse_hlo

        graphs = []
        for entry in self.graph_index():
            text = self.graph_text(entry)
            graphs.append(
                GraphInfo(
                    order=int(entry.get("order", len(graphs))),
                    step=entry.get("step"),
                    module=str(entry.get("module", "")),
                    hlo=None if text is None else parse_hlo(text),
                    skipped=entry.get("skipped"),
                )
            )
        return sorted(graphs, key=lambda g: g.order)

    # -- DataFrames --------------------------------------------------------------------------
    def steps(self) -> pd.DataFrame:
        """One row per step: wall time and metric deltas (seconds, counts)."""
        import pandas as pd

        rows = []
        for row in self.step_rows():
            record = asdict(row)
            aten = record.pop("aten")
            record["aten_fallback_calls"] = sum(
                v for k, v in aten.items() if k != "aten::_local_scalar_dense"
            )
            rows.append(record)
        columns = [f.name for f in fields(StepRow) if f.name != "aten"]
        return pd.DataFrame(rows, columns=[*columns, "aten_fallback_calls"])

    def events(self) -> pd.DataFrame:
        """One row per compilation/execution, with its step and the user's source line."""
        import pandas as pd

        from xlaprof.parse.frames import user_location

        columns = ["step", "kind", "cause", "graph_hash", "graph_inputs", "graph_outputs"]
        rows = []
        for event in self.debug_log().events:
            record = {k: v for k, v in event.record().items() if k in columns}
            location = user_location(event.frames)
            rows.append({**record, "location": None if location is None else str(location)})
        frame = pd.DataFrame(rows, columns=[*columns, "location"])
        for column in ("step", "graph_inputs", "graph_outputs"):
            frame[column] = frame[column].astype("Int64")
        return frame

    def compiles(self) -> pd.DataFrame:
        events = self.events()
        return events[events["kind"] == "compilation"].reset_index(drop=True)

    def regions_frame(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.regions(), columns=["step", "name", "calls", "seconds"])


def _line_offsets(raw: bytes) -> list[int]:
    offsets = [0]
    position = raw.find(b"\n")
    while position != -1:
        offsets.append(position + 1)
        position = raw.find(b"\n", position + 1)
    return offsets


def _step_at(line_starts: list[int], line: int, ends: list[Any], rows: list[StepRow]) -> int:
    """The step whose log span holds ``line`` (1-based); past the last step: last + 1."""
    offset = line_starts[min(line, len(line_starts)) - 1]
    index = bisect.bisect_right(ends, offset)
    if index < len(rows):
        return rows[index].step
    return (rows[-1].step + 1) if rows else 0


def find_runs(path: Path) -> list[Path]:
    """Run directories at ``path`` or below it (one per process), in a stable order."""
    if (path / RUN_JSON).is_file():
        return [path]
    found = sorted(p.parent for p in path.glob(f"*/{RUN_JSON}"))
    found += sorted(p.parent for p in path.glob(f"*/*/{RUN_JSON}"))
    return found


def load_run(path: str | os.PathLike[str]) -> Run:
    """Load one run directory (or the only one under ``path``)."""
    runs = load_runs(path)
    if len(runs) > 1:
        raise RunDirError(
            f"{path}: holds {len(runs)} process runs; use load_runs() or name one of them"
        )
    return runs[0]


def load_runs(path: str | os.PathLike[str]) -> list[Run]:
    """Every process run under ``path``, ordered by rank then folder name."""
    root = Path(path)
    if not root.exists():
        raise RunDirError(f"{root}: no such run directory")
    directories = find_runs(root)
    if not directories:
        raise RunDirError(f"{root}: not a run directory (no run.json here or below)")
    runs = [Run(directory, read_info(directory)) for directory in directories]
    runs.sort(key=lambda r: (r.info.rank if r.info.rank is not None else 1 << 30, str(r.path)))
    return runs


def read_info(directory: Path) -> RunInfo:
    """``run.json`` of one run directory, or ``RunDirError`` saying what is wrong with it."""
    path = directory / RUN_JSON
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise RunDirError(f"{path}: unreadable run.json ({error})") from None
    if not isinstance(data, dict):
        raise RunDirError(f"{path}: run.json is not an object")
    schema = data.get("schema")
    if not isinstance(schema, int) or schema < 1:
        raise RunDirError(f"{path}: no schema version in run.json")
    if schema > SCHEMA_VERSION:
        raise RunDirError(
            f"{path}: written by a newer xlaprof (run schema {schema}, this one reads up to "
            f"{SCHEMA_VERSION}); upgrade xlaprof"
        )
    return RunInfo.from_json(data)


def link_graphs(graphs: list[GraphInfo], compilations: list[DebugEvent]) -> dict[int, GraphInfo]:
    """Tie each compilation event to its graph and set the graph's hash.

    Both are in compile order: with equal counts they pair one to one; otherwise each event
    takes the next graph compiled at the same step. Returns ``id(event) -> graph``.
    """
    if not graphs:
        return {}
    if len(graphs) == len(compilations):
        pairs = list(zip(compilations, graphs, strict=True))
    else:
        by_step: dict[int | None, list[GraphInfo]] = {}
        for graph in graphs:
            by_step.setdefault(graph.step, []).append(graph)
        pairs = []
        for event in compilations:
            pending = by_step.get(event.step)
            if pending:
                pairs.append((event, pending.pop(0)))
    for event, graph in pairs:
        graph.graph_hash = event.graph_hash
    return {id(event): graph for event, graph in pairs}
