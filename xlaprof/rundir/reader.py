"""Reading a run directory (``Run``): typed rows for analysis, DataFrames for notebooks.

Everything here is plain files read without torch or torch_xla, so a run captured on a TPU VM is
analyzed anywhere. A cut last line of a JSON-lines file (a killed writer) is ignored.

``Run`` reads every file of the format, each in a short method, with its typed rows and its
notebook DataFrame next to each other; ``xlaprof.rundir.jsonfiles`` reads the JSON files
defensively (what does not fit the format is reported, not raised).
"""

from __future__ import annotations

import bisect
import math
import os
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.errors import RunDirError
from xlaprof.parse.debug_log import DebugEvent, DebugLog, parse_debug_log
from xlaprof.parse.metrics_report import HOST_SYNC_OP, MetricsParser, MetricsReport
from xlaprof.parse.units import loads as load_json
from xlaprof.rundir.jsonfiles import fits, read_jsonl, reason, short, typed_fields
from xlaprof.rundir.schema import (
    DEBUG_LOG,
    DYNAMO,
    EXECUTIONS,
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
    TORCH_TRACE_DIR,
    TRACE_DIR,
    ExecutionRow,
    GraphInfo,
    RegionRow,
    RunInfo,
    StepRow,
)
from xlaprof.safeio import (
    UnsafeFile,
    iter_lines,
    read_capped,
    read_gzip_capped,
    resolve_inside,
)

if TYPE_CHECKING:
    import pandas as pd


# Caps on what one run-directory file may hold: far above anything xlaprof writes, far below
# what would hurt the analysing machine.
MAX_RUN_JSON_BYTES = 16 * 1024**2
MAX_GRAPH_BYTES = 64 * 1024**2  # inflated: the writer keeps none larger (capture/graphs.py)
# Every graph file of one run together, inflated: the writer keeps at most 64 graphs, and real
# runs' graphs are a few MB each; past this the rest are not read (a warning says so).
MAX_RUN_GRAPH_BYTES = 1024**3
MAX_WARNINGS = 50


@dataclass
class Run:
    """A loaded run directory. DataFrame accessors are for notebooks; analyzers use the rows."""

    path: Path
    info: RunInfo
    # Parsed files, read once: a loaded Run is a snapshot of its directory.
    _steps: list[StepRow] | None = field(default=None, repr=False, compare=False)
    _debug_log: DebugLog | None = field(default=None, repr=False, compare=False)
    _graphs: list[GraphInfo] | None = field(default=None, repr=False, compare=False)
    _executions: list[ExecutionRow] | None = field(default=None, repr=False, compare=False)
    # What could not be read (damaged files): shown by analyze with the run's own warnings.
    load_warnings: list[str] = field(default_factory=list, repr=False, compare=False)
    # The folder the run was loaded from (``load_runs``): nothing outside it is read, though
    # the launch's folder beside the run may hold its TORCH_TRACE logs. None: the run's own.
    given: Path | None = field(default=None, repr=False, compare=False)

    def warn(self, message: str) -> None:
        if message not in self.load_warnings and len(self.load_warnings) < MAX_WARNINGS:
            self.load_warnings.append(message)

    @property
    def steps_recorded(self) -> int:
        """Steps in steps.jsonl, or run.json's count if larger (a run killed mid-write)."""
        return max(self.info.steps_recorded, len(self.step_rows()))

    # -- typed data --------------------------------------------------------------------------
    def step_rows(self) -> list[StepRow]:
        if self._steps is None:
            rows = []
            for data in read_jsonl(self.path / STEPS, self.warn):
                step = data.get("step")
                if not fits(step, "int"):
                    self.warn(f"{STEPS}: a row with step = {short(step)} skipped")
                    continue
                row = StepRow(**typed_fields(StepRow, data, self.warn, STEPS))
                row.aten = {k: v for k, v in row.aten.items() if v}
                rows.append(row)
            self._steps = rows
            recorded = self.info.steps_recorded
            if isinstance(recorded, int) and recorded > len(rows):
                # a cut or truncated file: say so, and what the analysis still has
                last = f", the last step {rows[-1].step}" if rows else ""
                self.warn(
                    f"{STEPS}: damaged: {len(rows)} of the {recorded} steps run.json recorded "
                    f"are readable{last}; per-step figures cover those steps only"
                )
        return self._steps

    def execution_rows(self) -> list[ExecutionRow] | None:
        """``executions.jsonl`` as typed rows (launch and completion of each execution, or a
        count of executions whose times were lost), or None where the run did not record it
        (an older xlaprof). A row whose times are not finite numbers with the launch at or
        before the completion is skipped, with a warning."""
        if self._executions is None:
            path = self.path / EXECUTIONS
            if not path.is_file():
                return None
            rows: list[ExecutionRow] = []
            for data in read_jsonl(path, self.warn):
                kept = typed_fields(ExecutionRow, data, self.warn, EXECUTIONS)
                missed = kept.get("missed", 0)
                launch, completion = kept.get("launch"), kept.get("completion")
                if launch is None and completion is None and isinstance(missed, int) and missed > 0:
                    before = kept.get("before")
                    if before is not None and not math.isfinite(before):
                        before = None  # placed nowhere: only counted
                    rows.append(ExecutionRow(missed=missed, before=before))
                elif _times_fit(launch, completion):
                    rows.append(ExecutionRow(launch=launch, completion=completion))
                else:
                    self.warn(f"{EXECUTIONS}: a row without a launch before its completion skipped")
            self._executions = rows
        return self._executions

    def region_rows(self) -> list[RegionRow]:
        """``regions.jsonl`` as typed rows; rows with fields of the wrong type are skipped."""
        rows = []
        for data in self.regions():
            kept = typed_fields(RegionRow, data, self.warn, REGIONS)
            if len(kept) == len(fields(RegionRow)):
                rows.append(RegionRow(**kept))
        return rows

    def host_sample_map(self) -> dict[int, dict[str, float]]:
        """``samples.jsonl`` as step -> {place: CPU seconds}; malformed entries are skipped.

        A step can have more than one row (the sampler's ticks are collected about once a
        second, and a tick can land just after its step's row was written): rows add up."""
        samples: dict[int, dict[str, float]] = {}
        for data in self.host_samples():
            step: Any = data.get("step")  # a JSON value: checked before use
            counts = data.get("samples")
            if not fits(step, "int") or not isinstance(counts, dict):
                self.warn(f"{SAMPLES}: a row without an integer step and a samples object")
                continue
            kept = {k: float(v) for k, v in counts.items() if fits(v, "float")}
            if len(kept) < len(counts):
                self.warn(f"{SAMPLES}: sample values that are not numbers ignored")
            mine = samples.setdefault(step, {})
            for place, seconds in kept.items():
                mine[place] = mine.get(place, 0.0) + seconds
        return samples

    def debug_log(self) -> DebugLog:
        """Debug analysis and fallback records, each event tagged with the step it fell in."""
        if self._debug_log is None:
            self._debug_log = self._read_debug_log()
        return self._debug_log

    def _read_debug_log(self) -> DebugLog:
        log = DebugLog()
        rows = self.step_rows()
        for name, offset_key in ((DEBUG_LOG, "debug_offset"), (FALLBACK_LOG, "fallback_offset")):
            path = self.path / name
            if not path.exists() and not path.is_symlink():
                continue
            # Lines are split on "\n" only, as the offsets in steps.jsonl count bytes up to a
            # "\n": str.splitlines() would also split on "\r", form feeds and U+2028.
            line_starts = array("q", [0])
            try:
                parsed = parse_debug_log(_lines_with_offsets(path, line_starts))
            except (OSError, UnsafeFile) as error:
                self.warn(f"{name}: not read ({reason(error)})")
                continue
            ends = [getattr(r, offset_key) for r in rows]
            if all(isinstance(e, int) for e in ends) and ends and ends == sorted(ends):
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
                parser = MetricsParser()
                try:
                    for number, raw in enumerate(iter_lines(path), start=1):
                        parser.line(number, raw.decode("utf-8", "replace").rstrip("\r\n"))
                except (OSError, UnsafeFile) as error:
                    self.warn(f"{METRICS_DIR}/{path.name}: not read ({reason(error)})")
                reports.extend(parser.finish().reports)
        return reports

    def regions(self) -> list[dict[str, Any]]:
        return read_jsonl(self.path / REGIONS, self.warn)

    def host_samples(self) -> list[dict[str, Any]]:
        """Per step: ``{"step": n, "samples": {"file:line" | "<library>": CPU seconds}}``."""
        return read_jsonl(self.path / SAMPLES, self.warn)

    def dynamo_records(self) -> list[dict[str, Any]]:
        """torch.compile's recompiles, graph breaks and compiles (``dynamo.jsonl``), in order."""
        return read_jsonl(self.path / DYNAMO, self.warn)

    def modules(self) -> dict[str, Any] | None:
        """The module stacks and repeated module calls of one step (``modules.json``)."""
        path = self.path / MODULES
        if not path.exists() and not path.is_symlink():
            return None
        try:  # capped, regular files only (a FIFO or /dev/zero is refused), nesting bounded
            data = load_json(read_capped(path, MAX_RUN_JSON_BYTES))
        except (OSError, UnsafeFile, ValueError, RecursionError) as error:
            self.warn(f"{MODULES}: not read ({reason(error)})")
            return None
        return data if isinstance(data, dict) else None

    def graph_index(self) -> list[dict[str, Any]]:
        """One entry per compiled module, in compile order: module, step, file (or skipped)."""
        return read_jsonl(self.path / GRAPHS_DIR / GRAPH_INDEX, self.warn)

    def graph_text(self, entry: dict[str, Any]) -> str | None:
        """The HLO text of one index entry, or None (not kept, or unreadable: then a warning).

        The file name comes from the run directory, which may have come from anyone: it is
        resolved inside ``graphs/`` only, read only if it is a regular file, and inflated only
        up to ``MAX_GRAPH_BYTES``.
        """
        data = self._graph_file(entry, "file")
        return None if data is None else data.decode("utf-8", errors="replace")

    def graph_proto(self, entry: dict[str, Any]) -> bytes | None:
        """The serialized HloProto kept beside an entry's text (its Python stacks), or None."""
        return self._graph_file(entry, "proto")

    def _graph_file(
        self, entry: dict[str, Any], key: str, reading: _GraphReading | None = None
    ) -> bytes | None:
        name = entry.get(key)
        if not name or not isinstance(name, str):
            return None
        graphs = self.path / GRAPHS_DIR
        try:
            path = resolve_inside(graphs, name)
            if reading is not None and not reading.admit(path):
                return None
            data = read_gzip_capped(path, MAX_GRAPH_BYTES)
        except UnsafeFile as error:
            self.warn(f"{GRAPHS_DIR}/: graph not read: {error}")
        except OSError as error:
            self.warn(f"{GRAPHS_DIR}/{short(name)}: graph not read ({reason(error)})")
        else:
            if reading is not None:
                reading.inflated += len(data)
            return data
        return None

    def torch_trace_files(self) -> list[Path]:
        """This process's TORCH_TRACE logs: in the run's own ``torch_trace/`` or the launch's
        (``xlaprof run`` writes ``<out>/torch_trace/``), the ones whose records carry its
        process id."""
        from xlaprof.parse.torch_trace import process_of
        from xlaprof.safeio import UnsafeFile, iter_lines

        found = []
        for folder in self._torch_trace_folders():
            if not folder.is_dir() or folder.is_symlink():
                continue
            for path in sorted(folder.glob("*.log"))[:4096]:
                try:
                    head = next(iter_lines(path, limit=4096), b"")
                except (OSError, UnsafeFile):
                    continue
                pid = process_of(head)
                if pid is not None and (self.info.pid is None or pid == self.info.pid):
                    found.append(path)
            if found:
                break
        return found

    def _torch_trace_folders(self) -> list[Path]:
        """The run's own ``torch_trace/``, and the launch's beside it only where the launch's
        folder is inside what the user gave (``given``): a run given on its own, or under an
        MCP root, reads nothing of its parent's."""
        folders = [self.path / TORCH_TRACE_DIR]
        if self.given is not None:
            parent = self.path.parent.resolve()
            if parent == self.given or self.given in parent.parents:
                folders.append(self.path.parent / TORCH_TRACE_DIR)
        return folders

    def trace_files(self) -> list[Path]:
        return sorted((self.path / TRACE_DIR).glob("*/*.xplane.pb"))

    def graphs(self) -> list[GraphInfo]:
        """Every compiled graph, parsed, in compile order."""
        if self._graphs is None:
            self._graphs = self._read_graphs()
        return self._graphs

    def _read_graphs(self) -> list[GraphInfo]:
        """The index's graphs, each file read and parsed once at most: work is bounded by the
        distinct bytes in the directory, not by how often its index names them."""
        from xlaprof.parse.hlo import parse_hlo, with_stacks

        graphs: list[GraphInfo] = []
        reading = _GraphReading()
        for entry in self.graph_index():
            repeats = reading.repeated
            text = self._graph_file(entry, "file", reading)
            hlo = None if text is None else parse_hlo(text.decode("utf-8", errors="replace"))
            proto = None if hlo is None else self._graph_file(entry, "proto", reading)
            if hlo is not None and proto is not None:
                hlo = with_stacks(hlo, proto)
            order: Any = entry.get("order")  # JSON values: checked before use
            step, skipped = entry.get("step"), entry.get("skipped")
            if reading.repeated > repeats and text is None:
                skipped = "its file is named by an earlier index entry (read once)"
            graphs.append(
                GraphInfo(
                    order=order if fits(order, "int") else len(graphs),
                    step=step if fits(step, "int | None") else None,
                    module=str(entry.get("module", "")),
                    hlo=hlo,
                    skipped=skipped if fits(skipped, "str | None") else str(skipped),
                )
            )
        reading.report(self.warn)
        return sorted(graphs, key=lambda g: g.order)

    # -- DataFrames --------------------------------------------------------------------------
    def steps(self) -> pd.DataFrame:
        """One row per step: wall time and metric deltas (seconds, counts).

        ``executions`` counts the graph executions the step launched, whenever they ran (the
        step model's attribution, ``rundir.executions``); ``completed`` how many completed
        while the step ran (its ``ExecuteTime`` samples, as ``steps.jsonl`` holds them, and
        ``execute_s`` their launch-to-completion seconds). A run without ``executions.jsonl``
        (an older xlaprof) has only the latter, as ``executions``."""
        import pandas as pd

        from xlaprof.rundir.executions import attribute

        rows = []
        step_rows = self.step_rows()
        device = attribute(step_rows, self.execution_rows())
        for index, row in enumerate(step_rows):
            record = asdict(row)
            aten = record.pop("aten")
            record["aten_fallback_calls"] = sum(v for k, v in aten.items() if k != HOST_SYNC_OP)
            record["completed"] = row.executions
            if device is not None:
                record["executions"] = device.steps[index].executions
            rows.append(record)
        columns = [f.name for f in fields(StepRow) if f.name != "aten"]
        return pd.DataFrame(rows, columns=[*columns, "aten_fallback_calls", "completed"])

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

        rows = [asdict(row) for row in self.region_rows()]
        return pd.DataFrame(rows, columns=["step", "name", "calls", "seconds"])


@dataclass
class _GraphReading:
    """What one pass over ``graphs/index.jsonl`` has read: each file once, and the inflated
    bytes of all of them together up to ``MAX_RUN_GRAPH_BYTES``."""

    seen: set[Path] = field(default_factory=set)
    inflated: int = 0
    repeated: int = 0
    over: int = 0

    def admit(self, path: Path) -> bool:
        """Whether ``path`` (resolved) is to be read: not read before, and the run's graph
        bytes not spent yet."""
        if path in self.seen:
            self.repeated += 1
            return False
        if self.inflated >= MAX_RUN_GRAPH_BYTES:
            self.over += 1
            return False
        self.seen.add(path)
        return True

    def report(self, warn: Callable[[str], None]) -> None:
        if self.repeated:
            warn(
                f"{GRAPHS_DIR}/{GRAPH_INDEX}: damaged: {self.repeated} entries name a graph "
                "file an earlier entry names; each file is read once"
            )
        if self.over:
            warn(
                f"{GRAPHS_DIR}/: {self.over} graph files not read: the run's graphs inflate "
                f"to more than {MAX_RUN_GRAPH_BYTES} bytes together"
            )


def _times_fit(launch: object, completion: object) -> bool:
    """Whether an execution row's times are finite Unix seconds, launch first."""
    if not isinstance(launch, float) or not isinstance(completion, float):
        return False
    if not (math.isfinite(launch) and math.isfinite(completion)):
        return False
    return 0.0 <= launch <= completion


def _lines_with_offsets(path: Path, starts: array[int]) -> Iterator[str]:
    """The decoded lines of ``path``; appends each next line's byte offset to ``starts``."""
    position = 0
    for raw in iter_lines(path):
        position += len(raw)
        starts.append(position)
        yield raw.decode("utf-8", errors="replace")


def _step_at(line_starts: Sequence[int], line: int, ends: list[Any], rows: list[StepRow]) -> int:
    """The step whose log span holds ``line`` (1-based); past the last step: last + 1."""
    offset = line_starts[max(min(line, len(line_starts)), 1) - 1]
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


def load_runs(path: str | os.PathLike[str], found: list[Path] | None = None) -> list[Run]:
    """Every process run under ``path``, ordered by rank then folder name (``found``: the
    run directories ``find_runs`` found there already, so that they are not looked for
    again)."""
    root = Path(path)
    if not root.exists():
        raise RunDirError(f"{root}: no such run directory")
    directories = find_runs(root) if found is None else found
    if not directories:
        raise RunDirError(f"{root}: not a run directory (no run.json here or below)")
    given = root.resolve()
    runs = [Run(directory, read_info(directory), given=given) for directory in directories]
    runs.sort(key=lambda r: (r.info.rank if r.info.rank is not None else 1 << 30, str(r.path)))
    return runs


def read_info(directory: Path, follow: bool = True) -> RunInfo:
    """``run.json`` of one run directory, or ``RunDirError`` saying what is wrong with it.

    ``follow=False`` refuses a ``run.json`` that is a link (the MCP server's listings, which
    read nothing through a link)."""
    path = directory / RUN_JSON
    try:
        data = load_json(read_capped(path, MAX_RUN_JSON_BYTES, follow))
    except (OSError, UnsafeFile, ValueError, RecursionError) as error:
        raise RunDirError(f"{path}: unreadable run.json ({reason(error)})") from None
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
    damaged: list[str] = []
    info = RunInfo(**typed_fields(RunInfo, data, damaged.append, RUN_JSON))
    info.warnings = [*info.warnings, *damaged]
    if info.trace_steps is not None and len(info.trace_steps) != 2:
        info.warnings.append(f"{RUN_JSON}: trace_steps = {short(info.trace_steps)} ignored")
        info.trace_steps = None
    return info


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
