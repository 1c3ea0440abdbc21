"""The analysis, end to end: ``analyze(request) -> AnalysisResult``.

One request (``xlaprof.model.request.AnalysisRequest``: inputs, process, session, warm-up,
source roots, size limits, where a pod's hosts are read) goes in; one finished result comes
out: every part's findings, its step timeline and story, its host tables, and its figures
(``PartResult.figures``: the numbers diff, check, MCP and the notebook quote). ``analyze``,
``report``, ``diff``, ``check``, ``mcp``, ``bench`` and the notebook facade all call
``analyze``, so one analysis stands behind every output.

The pipeline never changes its inputs: a part's analyzer input gets the capture and the
user's source files as a new ``AnalysisInput`` (``dataclasses.replace``), and the note on
withheld source files goes into a new ``RunSummary``, never into the loaded one's lists.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlaprof.analyzers import answer_of, examine, story_answers
from xlaprof.inputs.choose import choose
from xlaprof.inputs.paths import load_inputs
from xlaprof.inputs.sourcefiles import SourceFiles, recorded_root, withheld_note
from xlaprof.model.ondisk import HOST_STEPS
from xlaprof.model.request import ALL_PROCESSES, DEFAULT_MAX_INPUT_BYTES, AnalysisRequest
from xlaprof.model.result import (
    AnalysisResult,
    Counts,
    KeptRows,
    PartInfo,
    PartResult,
    RunComparison,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from xlaprof.budgets import Budgets, CheckResult
    from xlaprof.findings import Finding
    from xlaprof.inputs.formats import Sniffed
    from xlaprof.model.input import AnalysisInput
    from xlaprof.model.parts import Part
    from xlaprof.model.trace import Trace
    from xlaprof.rundir.reader import Run

__all__ = [
    "DEFAULT_MAX_INPUT_BYTES",
    "AnalysisRequest",
    "AnalyzedPart",
    "analyze",
    "analyze_inputs",
    "analyze_parts",
    "check",
    "compare",
    "figures_compared",
    "top_ops_of",
]


def analyze(request: AnalysisRequest) -> AnalysisResult:
    """Load ``request``'s inputs, choose the process runs it names (the latest run's, unless
    ``process`` says otherwise), analyze each, and return the finished result. A saved
    result (a document of ``xlaprof analyze --json``, given alone) is read back as it was,
    every part naming the file read (``xlaprof.inputs.saved``)."""
    from xlaprof.inputs.formats import format_of, sniff_path
    from xlaprof.inputs.saved import load_saved

    # each input looked at once (``xlaprof.inputs.formats``), then read once by its format
    sniffed = [sniff_path(Path(p)) for p in request.inputs]
    if len(sniffed) == 1 and format_of(sniffed[0]).name == "saved_result":
        return load_saved(sniffed[0].path, request.max_size, request.process)
    parts, processes, notes = _load(request, sniffed)
    results = [_analyze_part(part, request).result for part in parts]
    counts = [r.counts for r in results if r.counts is not None]
    totals = Counts.total(counts) if len(results) > 1 else None
    return AnalysisResult(results, processes=processes, notes=notes, totals=totals)


def _load(
    request: AnalysisRequest, sniffed: list[Sniffed]
) -> tuple[list[Part], list[str], list[str]]:
    """The parts ``request`` reads (its inputs as ``sniffed``), every process name found, and
    what was chosen."""
    from xlaprof.errors import XlaprofError

    if not request.inputs:
        raise XlaprofError("no input to analyze")
    parts = load_inputs(
        sniffed,
        request.max_size,
        request.warmup_steps,
        request.session,
        scheduler=request.scheduler,
        workers=request.workers,
        capture_limit=_capture_limit(request),
        pod=request.pod,
    )
    if not any(p.run is not None for p in parts) or len(request.inputs) == 1:
        chosen = choose(parts, request.process, str(request.inputs[0]))
        return chosen.parts, chosen.processes, chosen.notes
    # Several run folders given: the runs of each are told apart on their own.
    kept: list[Part] = []
    processes: list[str] = []
    notes: list[str] = []
    for root in request.inputs:
        mine = [p for p in parts if p.run is not None and _under(p.run.path, root)]
        if not mine:
            continue
        process = request.process
        if process not in (None, ALL_PROCESSES) and process not in {p.name for p in mine}:
            process = ALL_PROCESSES  # a named process is looked for across the inputs
        chosen = choose(mine, None if process is None else ALL_PROCESSES, str(root))
        if request.process not in (None, ALL_PROCESSES):
            chosen = dataclasses.replace(
                chosen, parts=[p for p in chosen.parts if p.name == request.process]
            )
        kept += [p for p in chosen.parts if all(p is not k for k in kept)]
        processes += chosen.processes
        notes += chosen.notes
    if request.process not in (None, ALL_PROCESSES) and not kept:
        choose(parts, request.process, ", ".join(map(str, request.inputs)))  # raises
    return kept, processes, notes


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root.resolve())
    except ValueError:
        return False
    return True


# -- what the inputs stage says of a path, for the stages after the pipeline (MCP's listings):
# they reach inputs and run directories only through here.


def recorded_root_of(part: Part) -> Path | None:
    """The working directory ``part``'s run recorded, when it is a real project folder here."""
    return None if part.run is None else recorded_root(part.run.info.cwd)


def runs_in(folder: Path) -> list[Path]:
    """The run directories at or under ``folder`` (one per process)."""
    from xlaprof.rundir.reader import find_runs

    return find_runs(folder)


def run_record(run: Path) -> tuple[str, int | None]:
    """A run directory's recorded status and steps (``RunDirError`` where its ``run.json``
    cannot be read; one that is a link is not followed)."""
    from xlaprof.rundir.reader import read_info

    info = read_info(run, follow=False)
    return info.status, info.steps_recorded


def is_capture(path: Path) -> bool:
    """Whether ``path`` is a profiler capture file (an xplane, a Chrome/Kineto trace)."""
    from xlaprof.inputs.captures import is_capture_file

    return is_capture_file(path)


def is_saved_result(path: Path) -> bool:
    """Whether ``path`` is a document saved by ``xlaprof analyze --json`` (a saved result)."""
    from xlaprof.inputs.saved import is_saved

    return is_saved(path)


def source_root_of(part: Part, request: AnalysisRequest) -> Path | None:
    """The folder whose source files findings on ``part`` may quote: the request's
    ``source_root_of(part)`` or ``source_root``, else a run's recorded working directory."""
    if request.source_root_of is not None:
        return request.source_root_of(part)
    if request.source_root is not None:
        return Path(request.source_root)
    if part.run is not None:
        return recorded_root(part.run.info.cwd)  # a real project folder only
    return None


@dataclass
class AnalyzedPart:
    """One part analyzed, beside what it was analyzed from: the part (its analyzer input as
    the analyzers read it, with its trace and the user's source files), the trace (a capture,
    or a run's trace window) and the finished result. The pipeline's own working state, and
    what a test of the tables looks at; the result holds none of the inputs."""

    part: Part
    trace: Trace | None
    result: PartResult

    @property
    def data(self) -> AnalysisInput:
        return self.part.data

    @property
    def run(self) -> Run | None:
        return self.part.run


def _info(part: Part, trace: Trace | None) -> PartInfo:
    """What ``part`` was, as the result names it (no live input)."""
    return PartInfo(
        name=part.name,
        sources=list(part.sources),
        run_summary=part.run_summary,
        trace_path=part.trace_path,
        run_path=None if part.run is None else str(part.run.path),
        warmup_steps=part.data.warmup_steps,
        trace_only=part.trace_only,
        traced=trace is not None,
        hosts=[] if trace is None else list(trace.hosts),
        session=None if trace is None else trace.session,
        sessions=[] if trace is None else list(trace.sessions),
        trace_warnings=[] if trace is None else list(trace.warnings),
    )


def _findings(part: Part, request: AnalysisRequest, trace: Trace | None) -> AnalyzedPart:
    """The part's findings, on a new analyzer input carrying its trace; the part as the result
    names it (with the withheld-sources note, when there is one)."""
    recorded = None if part.run is None else part.run.info.cwd
    sources = SourceFiles([source_root_of(part, request)], recorded=recorded)
    data = dataclasses.replace(
        part.data, trace=trace, sources=sources, **_host_side(part.data, trace)
    )
    found, coverage = examine(data)
    findings = [_plain(finding) for finding in found]
    note = withheld_note(sources.withheld(), sources.roots)
    shown = dataclasses.replace(part, data=data)
    if note is not None:
        shown = _with_note(shown, note)
    result = PartResult(_info(shown, trace), findings, analyzers=coverage)
    return AnalyzedPart(shown, trace, result)


def _plain(finding: Finding) -> Finding:
    """``finding`` as its JSON says it (tuples as lists, a number not measured as None): the
    result is the same whether rendered now or read back from ``--json``."""
    import json

    from xlaprof.findings import Finding
    from xlaprof.tables.document import strict_document

    return Finding.from_json(
        strict_document(json.loads(json.dumps(finding.to_json(), default=str)))
    )


def _with_note(part: Part, note: str) -> Part:
    """``part`` with ``note`` added to its warnings (console notes, ``--json``, HTML): a new
    run summary or source, so the loaded part is left as it was."""
    from xlaprof.parse.metrics_report import ParseWarning

    if part.run_summary is not None:
        summary = dataclasses.replace(part.run_summary, warnings=[*part.run_summary.warnings, note])
        return dataclasses.replace(part, run_summary=summary)
    if part.sources:
        first = part.sources[0]
        warned = dataclasses.replace(
            first, warnings=[*first.warnings, ParseWarning(line=0, text="", reason=note)]
        )
        return dataclasses.replace(part, sources=[warned, *part.sources[1:]])
    return part


def _analyze_part(part: Part, request: AnalysisRequest) -> AnalyzedPart:
    from xlaprof.tables.compare import run_summary

    trace = part.trace if part.trace is not None else _trace_window(part, request)
    work = _findings(part, request, trace)
    result = work.result
    _add_tables(work)
    _add_host_tables(work)
    figures = run_summary(work.data)
    if figures.get("compiles") is None and result.compile_summary is not None:
        # a TORCH_TRACE log alone: its compiles are the part's (no torch_xla counter ran)
        figures["compiles"] = result.compile_summary.compiles
    intermediate = [
        e.memory.intermediate_bytes
        for e in work.data.debug.compilations()
        if e.memory is not None and e.memory.intermediate_bytes is not None
    ]
    # the largest graph's intermediate buffers, as PT_XLA_DEBUG measured them (a fix's bench)
    figures["intermediate_bytes"] = max(intermediate) if intermediate else None
    figures.update(_cache_counters(work.data))
    story = result.story
    if story is not None and story.median_wall_s is not None:
        # the one step model: the median steady step the story names is the run's median step
        figures["step_median_s"] = story.median_wall_s
    result.figures = figures
    _finish(work)
    return work


# The persistent compile cache's counters in a metrics report, by the figure each becomes.
CACHE_COUNTERS = {
    "cache_hits": "PersistentCacheHit",
    "cache_misses": "PersistentCacheMiss",
    "cache_deserialize_failures": "PersistentCacheDeserializeFailure",
}


def _cache_counters(data: AnalysisInput) -> dict[str, int | None]:
    """The last metrics report's persistent-cache counters (None: no report; 0: a report
    without the counter, torch_xla's way of saying it never counted), for ``bench cache``."""
    if not data.reports:
        return dict.fromkeys(CACHE_COUNTERS)
    counters = data.reports[-1].counters
    return {figure: counters.get(name) or 0 for figure, name in CACHE_COUNTERS.items()}


def _finish(work: AnalyzedPart) -> None:
    """Everything the renderers show that the tables above did not make: the counts, the
    device view, the figures' tables and the document's reports and events, so that no
    renderer computes or reads a file; and the tables held whole (or, a pod's, named by its
    row store) for the notebook and the MCP tools."""
    result, data = work.result, work.data
    compiles = data.compiles()
    if compiles is None and result.compile_summary is not None:
        compiles = result.compile_summary.compiles  # a TORCH_TRACE log's (see _analyze_part)
    result.counts = Counts(
        steps=data.step_count(),
        compiles=compiles,
        executions=data.executions(),
        device_to_host_transfers=data.device_to_host_transfers(),
        aten_fallbacks=data.aten_fallbacks(),
        fallbacks_named=_named_in_logs(data),
        measured=bool(data.reports or data.steps),
        warmup_steps=data.warmup_steps,
    )
    from xlaprof.tables.check_figures import check_figures

    result.checked = check_figures(data, work.run)
    from xlaprof.tables.document import event_json, report_json

    result.reports_json = [report_json(r) for r in data.reports]
    result.events_json = [event_json(e) for e in data.debug.events]
    trace = work.trace
    if trace is not None:
        from xlaprof.tables.device.view import device_view
        from xlaprof.tables.document import trace_json

        result.devices = device_view(trace)
        result.trace_json = trace_json(trace, result.part.trace_path)
        pod = {} if work.part.trace is None else trace.events_source.load_record(trace)
        if pod:  # hosts read by workers (inputs.pod): where, how long, failures
            result.trace_json["pod"] = pod
        result.whole.update(_trace_tables(trace))
        result.store = trace.events_source.row_store()
    if work.run is not None:
        run = work.run
        result.whole.update(
            steps=run.steps(),
            events=run.events(),
            compiles=run.compiles(),
            regions=run.regions_frame(),
        )
    host_steps = _host_step_rows(work)
    drawn = _heatmap_steps(result, host_steps)
    result.frames = _figure_frames(work, host_steps, drawn)
    _keep_rows(result, drawn)


def _trace_tables(trace: Trace) -> dict[str, pd.DataFrame]:
    """The trace's device model as tables held whole by the result: those held in memory (a
    pod's per-step ones stay on disk, named by its row store)."""
    from xlaprof.tables.device import top_ops
    from xlaprof.tables.document import devices_table

    summary = trace.summary()
    tables: dict[str, pd.DataFrame | None] = {
        "device_ops": summary.ops,
        # every op summed over devices, most self time first (the figure draws the first)
        "top_ops": top_ops(summary.ops, limit=max(len(summary.ops), 1)),
        "device_utilization": summary.utilization,
        "devices": devices_table(trace),
        "lines": summary.lines,
        "line_totals": summary.line_totals,
    }
    if not summary.on_disk("steps"):
        tables["device_steps"] = trace.device_steps()
    if not summary.on_disk("tracing"):
        tables["tracing"] = trace.tracing_vs_device()
    if not summary.on_disk("bottleneck"):
        tables["bottlenecks"] = trace.bottlenecks()
    return {name: frame for name, frame in tables.items() if frame is not None}


# The per-host step rows' columns the heat map reads (``_heatmap_steps``, ``_figure_frames``).
HEATMAP_COLUMNS = ("host", "device", "step", "wall_ms")


def _heatmap_steps(result: PartResult, host_steps: pd.DataFrame | None) -> tuple[str, Any] | None:
    """The device the host x step heat map draws and the steps it draws of it (None: every
    step), or None without several hosts' steps (``tables.bounded.heatmap_steps``)."""
    import numpy as np

    from xlaprof.tables.bounded import heatmap_steps

    if host_steps is None or host_steps.empty:
        return None
    devices = sorted(host_steps["device"].unique(), key=lambda d: (d == "host", str(d)))
    device = devices[-1] if "host" in devices else devices[0]
    steps = np.unique(host_steps.loc[host_steps["device"] == device, "step"].to_numpy())
    stragglers = result.stragglers
    if stragglers is None:
        return device, None
    return device, heatmap_steps(stragglers, str(device), steps)


def _host_step_rows(work: AnalyzedPart) -> pd.DataFrame | None:
    """Several hosts' rows per (host, device, step) of a trace: the result's, or a pod's from
    its files (None: not a trace of several hosts)."""
    trace, result = work.trace, work.result
    if trace is None:
        return None
    store = trace.events_source.row_store()
    if result.host_steps is None and len(trace.hosts) > 1 and HOST_STEPS in store:
        import pandas as pd

        rows = store.read(HOST_STEPS, columns=list(HEATMAP_COLUMNS))  # a pod's, from its files
        return rows if len(rows) else pd.DataFrame(columns=list(HEATMAP_COLUMNS))
    return result.host_steps


def _keep_rows(result: PartResult, drawn: tuple[str, Any] | None) -> None:
    """Cut the result's per-step tables to their bounds (``tables.bounded``), keeping every
    row in ``every_row`` (the notebook's) and saying in ``rows_kept`` what was kept; the
    console's figures of the stragglers and host skew over every row go to ``summaries``
    whether or not a table was cut (``drawn``: the heat map's device and steps)."""
    import numpy as np

    from xlaprof.tables import bounded

    story = result.story
    if result.timeline is not None:
        median = None if story is None else story.median_step
        kept, told = bounded.thin_timeline(result.timeline, result.part.warmup_steps, median)
        _cut(result, "timeline", kept, told)
    device, steps = drawn if drawn is not None else (None, None)
    stragglers = result.stragglers
    if stragglers is not None:
        shown = (stragglers["device"] == device) & stragglers["step"].isin(
            [] if steps is None else steps
        )
        positions = bounded.first_and_worst(
            stragglers,
            "behind_ms",
            bounded.MAX_STRAGGLER_ROWS,
            bounded.STRAGGLER_FIRST_ROWS,
            also=np.flatnonzero(shown.to_numpy()),
        )
        chosen = (
            f"the first {bounded.STRAGGLER_FIRST_ROWS} rows (steps in order), the rows of the "
            "steps the heat map draws, and the rows whose slowest host was furthest behind "
            "the median host (behind_ms)"
        )
        _cut_with_figures(
            result, "stragglers", positions, chosen, bounded.straggler_summary(stragglers)
        )
    skew = result.host_skew
    if skew is not None:
        positions = bounded.first_and_worst(
            skew, "skew", bounded.MAX_SKEW_ROWS, bounded.SKEW_FIRST_ROWS
        )
        chosen = (
            f"the first {bounded.SKEW_FIRST_ROWS} steps and the steps of largest skew "
            "(slowest over fastest host)"
        )
        _cut_with_figures(result, "host_skew", positions, chosen, bounded.skew_summary(skew))
    if result.host_steps is not None and steps is not None:
        rows = result.host_steps
        positions = np.flatnonzero(rows["step"].isin(steps).to_numpy())
        kept, told = bounded.keep_rows(rows, positions, "the steps the heat map draws")
        _cut(result, "host_steps", kept, told)


def _cut_with_figures(
    result: PartResult,
    name: str,
    positions: np.ndarray,
    chosen: str,
    figures: dict[str, Any] | None,
) -> None:
    """Keep the rows at ``positions`` of the result's table ``name`` (``chosen``: how they
    were chosen), and its one-line figures over every row (``figures``) as the result's
    ``summaries[name]``, and in ``rows_kept`` where rows were cut."""
    from xlaprof.tables import bounded

    if figures is not None:
        result.summaries[name] = figures
    kept, told = bounded.keep_rows(getattr(result, name), positions, chosen)
    if told is not None:
        told.summary = figures
    _cut(result, name, kept, told)


def _cut(result: PartResult, name: str, kept: pd.DataFrame, told: KeptRows | None) -> None:
    """Hold ``kept`` as the result's table ``name`` where rows were cut (``told``)."""
    if told is None:
        return
    result.every_row[name] = getattr(result, name)
    setattr(result, name, kept)
    result.rows_kept[name] = told


def _named_in_logs(data: AnalysisInput) -> str:
    """Ops a log names as not lowered (``Op(s) not lowered`` lines: no call counts), or ""."""
    lines: dict[str, int] = {}
    for record in data.debug.fallbacks:
        if record.listed and record.op:
            lines[record.op] = lines.get(record.op, 0) + record.count
    return ", ".join(f"{op} (named in {n} line(s); calls not counted)" for op, n in lines.items())


# The run's per-step columns the figures draw (compilations, metric deltas).
STEP_FIGURE_COLUMNS = (
    "step",
    "compiles",
    "compile_s",
    "executions",
    "transfers_to_device",
    "transfers_from_device",
)
# Ops and device steps drawn at most (``report.figures``' own limits).
TOP_FIGURE_OPS = 15
DEVICE_FIGURE_STEPS = 200


def _figure_frames(
    work: AnalyzedPart,
    host_steps: pd.DataFrame | None = None,
    drawn: tuple[str, Any] | None = None,
) -> dict[str, pd.DataFrame]:
    """The tables the HTML report's and the notebook's figures draw, as numbers: a run's
    per-step rows and compilations, each region's host seconds, the top device ops, each
    device's first steps, and the per-host steps of the device the heat map shows (``drawn``:
    that device and the steps it draws, ``_heatmap_steps``)."""
    frames: dict[str, pd.DataFrame] = {}
    result = work.result
    if work.run is not None:
        steps = result.whole["steps"]
        if not steps.empty:
            frames["steps"] = steps[[c for c in STEP_FIGURE_COLUMNS if c in steps.columns]]
        compiles = result.whole["compiles"]
        if not compiles.empty:
            frames["compiles"] = compiles[["step", "cause", "location", "graph_hash"]]
        regions = result.whole["regions"]
        if not regions.empty:
            totals = regions.groupby("name", sort=True)["seconds"].sum()
            frames["regions"] = totals.reset_index()
    trace = work.trace
    if trace is not None:
        import numpy as np

        frames["device_ops"] = result.whole["top_ops"].head(TOP_FIGURE_OPS)
        steps = _device_step_columns(trace, ["device", "step", "busy_s", "idle_s"])
        columns = [c for c in ("device", "step", "busy_s", "idle_s") if c in steps.columns]
        frames["device_steps"] = (
            steps.groupby("device", sort=True).head(DEVICE_FIGURE_STEPS)[columns]
            if len(steps)
            else steps[columns]
        )
        if host_steps is not None and not host_steps.empty and drawn is not None:
            device, steps = drawn
            mine = host_steps[host_steps["device"] == device][["host", "device", "step", "wall_ms"]]
            if steps is not None:
                from xlaprof.tables.bounded import HEATMAP_FIRST_STEPS, keep_rows

                chosen = (
                    f"the first {HEATMAP_FIRST_STEPS} steps and the steps whose slowest host "
                    "was furthest behind the median host"
                )
                positions = np.flatnonzero(mine["step"].isin(steps).to_numpy())
                mine, told = keep_rows(mine, positions, chosen)
                if told is not None:
                    result.rows_kept["frame:host_steps"] = told
            frames["host_steps"] = mine
    return frames


def _device_step_columns(trace: Trace, columns: list[str]) -> pd.DataFrame:
    """``trace.device_steps()``, of a pod only ``columns`` read from its hosts' files (every
    host's rows: a pod's device steps grow with hosts x steps, the figure draws four columns)."""
    from xlaprof.model.ondisk import DEVICE_STEPS

    summary = trace.summary()
    if summary.tables is not None and summary.on_disk("steps"):
        return summary.tables.table(DEVICE_STEPS, columns=columns)
    return trace.device_steps()


def _has_device_planes(trace: Trace) -> bool:
    """Whether what the step timeline reads (``step_view``: a pod's first host, else the trace
    itself) has a device plane; without one, the device model's busy time is the host CPU's
    own XLA ops, not a device the host waits on (``tables.story``)."""
    devices = trace.devices
    if devices is None or devices.empty:
        return False
    if "host" not in devices:
        return True
    hosts = trace.events_source.step_hosts(trace)
    return bool(devices["host"].astype(str).isin(hosts).any())


def _add_tables(work: AnalyzedPart) -> None:
    """The step timeline, the story and the host tables of the part (made here, once)."""
    from xlaprof.analyzers import price
    from xlaprof.analyzers.shared.costs import StepCosts
    from xlaprof.tables.story import step_story, with_bounds, worth_most
    from xlaprof.tables.timeline import EVENT_COLUMNS, steady_step, step_timeline, trace_timeline

    data, trace, result = work.data, work.trace, work.result
    if data.steps or trace is not None:
        if trace is None:
            timeline = step_timeline(data.steps, device=data.device)
        else:

            def of_events(view_of: Trace) -> pd.DataFrame:
                # what the step timeline reads: a pod's first host, from its own files
                view = view_of.step_view(EVENT_COLUMNS)
                return trace_timeline(view, data.steps, data.device)

            # a capture's from its events alone (a pod's: its first host's, kept beside its
            # cache once made); a run's trace window's with the run's steps
            source = trace.events_source
            timeline = of_events(trace) if data.steps else source.step_timeline(trace, of_events)
        # the one step model: every per-step verdict and the story come from its parts; a
        # capture with no device plane has no device to wait on (its busy time is the host
        # CPU's own XLA ops)
        planes = trace is None or _has_device_planes(trace)
        if trace is not None and data.host_activity is not None:
            # compiles the host table measured and the timeline did not: the story's too
            from xlaprof.tables.host_steps import with_host_compiles
            from xlaprof.tables.timeline import timeline_host

            host = timeline_host(trace.events_source.held_events())
            timeline = with_host_compiles(timeline, data.host_activity, host)
        result.timeline = with_bounds(timeline, data.warmup_steps, device_planes=planes)
        if trace is not None and data.steps:
            _trace_bounds(trace, result.timeline)
        device = data.device
        drain, lost = (None, None) if device is None else (device.drain_s, device.lost)
        result.story = step_story(result.timeline, data.warmup_steps, planes, drain, lost)
        # of every row (the timeline is cut to its bound later, ``_keep_rows``)
        result.steady = steady_step(result.timeline, data.warmup_steps)
        price(result.findings, StepCosts.of(data.steps, result.timeline, data.warmup_steps))
        if result.story is not None:
            chosen = worth_most(result.story, result.findings, story_answers())
            result.story.worth_most = chosen
            if chosen is not None:
                result.story.worth_most_answer = answer_of(result.story.bound, chosen.kind)
    if trace is not None and len(trace.hosts) > 1:
        from xlaprof.inputs.pod import host_tables

        tables = host_tables(trace)  # a pod's: a range of steps at a time, its rows on disk
        result.host_skew, result.host_steps = tables.skew, tables.host_steps
        result.stragglers = tables.stragglers


def _trace_bounds(trace: Trace, timeline: pd.DataFrame) -> None:
    """A run's trace window: its host-vs-device table takes each step's bound from the step
    model (``tables.story.with_step_bounds``), as the timeline and the story do. Its own answer
    compares only the runtime's host spans with the device's busy time; the step model counts
    the run's CPU clock, Python included. One host only: the timeline is that host's."""
    from xlaprof.tables.story import with_step_bounds

    summary = trace.summary()
    if len(trace.hosts) != 1 or summary.on_disk("tracing"):
        return
    summary.tracing = with_step_bounds(summary.tracing, timeline)


def _host_side(data: AnalysisInput, trace: Trace | None) -> dict[str, Any]:
    """What the analyzers read of a capture's host where it has no device
    (``tables.host_steps``), and the dynamo records with the TORCH_TRACE compiles of the same
    run placed in the steps the capture shows: fields of the part's new analyzer input (the
    loaded records are left as they were)."""
    from xlaprof.tables.host_steps import host_activity, place_compiles

    if trace is None:
        return {}
    return {
        "host_activity": host_activity(trace),
        "dynamo": place_compiles(data.dynamo, data.torch_traces, trace),
    }


def _add_host_tables(work: AnalyzedPart) -> None:
    """The host sections of ``result``: a capture's host time per step (with the steady steps
    and the median as the story counts them, so the tables agree) and the TORCH_TRACE compile
    table with its totals."""
    data, result = work.data, work.result
    result.host_activity = data.host_activity
    if data.host_activity is not None:
        from xlaprof.tables.host_steps import host_view

        result.host_view = host_view(data.host_activity, result.timeline, data.warmup_steps)
    if data.torch_traces:
        from xlaprof.tables.torch_compiles import compile_summary, compile_table

        result.torch_compiles = compile_table(data.torch_traces, data.dynamo)
        result.compile_summary = compile_summary(result.torch_compiles)


def _trace_window(part: Part, request: AnalysisRequest) -> Trace | None:
    """The trace a run directory captured (``--trace-steps``), or None."""
    if part.run is None or not part.run.trace_files():
        return None
    from xlaprof.inputs.traces import load_trace
    from xlaprof.rundir.executions import device_windows, host_windows
    from xlaprof.tables.device.events import STATS_READ

    # steps numbered from the run's trace window; each step's device events where its
    # executions ran (the host runs ahead of the device)
    device = part.data.device
    windows = None if device is None else device_windows(device)
    window = part.run.info.trace_steps
    return load_trace(
        part.run.path,
        first_step=window[0] if window else 0,  # the run's own, already read
        max_size=_capture_limit(request),
        device_windows=windows,
        host_windows=host_windows(part.data.steps),  # each step's host wall, as its row has it
        pod=request.pod,
        graphs=part.run.graphs(),  # read once: the run's own, already loaded
        args=STATS_READ,  # the stats the analysis reads, not every one
        read_only=True,  # it writes into none of the events' columns
    )


def _capture_limit(request: AnalysisRequest) -> int | None:
    """The cap on each capture file: the user's ``--max-size``, else each reader's own."""
    return request.max_size if request.max_size_given else None


def analyze_parts(parts: list[Part], request: AnalysisRequest | None = None) -> list[PartResult]:
    """Parts loaded already, analyzed as ``analyze`` does (``request``: its settings; inputs
    and process are not read)."""
    return [analyzed.result for analyzed in analyze_inputs(parts, request)]


def analyze_inputs(parts: list[Part], request: AnalysisRequest | None = None) -> list[AnalyzedPart]:
    """``analyze_parts``, each result beside the part and trace it was made from (the tables'
    tests read those; every output reads the result alone)."""
    request = request or AnalysisRequest(())
    return [_analyze_part(part, request) for part in parts]


def compare(before: AnalysisRequest, after: AnalysisRequest) -> RunComparison:
    """``xlaprof diff``: one process of each run analyzed (the named one, else the latest
    run's first), their figures side by side, the findings that went and came, and the notes
    saying which process each side is."""
    from xlaprof.tables.compare import match_findings

    a, b = analyze(before).one(), analyze(after).one()
    table = figures_compared(a.parts[0].figures, b.parts[0].figures)
    gone, came = match_findings(a.parts[0].findings, b.parts[0].findings)
    names = (str(before.inputs[0]), str(after.inputs[0]))
    return RunComparison(*names, table, gone, came, notes=[*a.notes, *b.notes], sides=(a, b))


def top_ops_of(
    result: PartResult, host: str | None = None, device: str | None = None
) -> pd.DataFrame:
    """``result``'s device ops summed over devices, most self time first, every op: the table
    the analysis made (``PartResult.table("top_ops")``), or, for one host or device, the ops of
    that one summed (``xlaprof mcp``'s top_ops view); an empty table where no ops are held."""
    from xlaprof.tables.device import top_ops

    held = result.table("top_ops")
    if host is None and device is None and held is not None:
        return held
    ops = result.device_ops()
    if host is not None and "host" in ops.columns:
        ops = ops[ops["host"] == host]
    if device is not None and "device" in ops.columns:
        ops = ops[ops["device"] == device]
    return top_ops(ops, limit=max(len(ops), 1))


def figures_compared(before: dict[str, Any], after: dict[str, Any]) -> pd.DataFrame:
    """Two parts' figures (``PartResult.figures``) side by side, as ``xlaprof diff`` shows
    them: one row per figure, before, after, their ratio and the change in words."""
    from xlaprof.tables.compare import compare as side_by_side

    return side_by_side(before, after)


def check(
    request: AnalysisRequest, budgets: Budgets, tell: Callable[[str], None] | None = None
) -> CheckResult:
    """``xlaprof check``: ``request``'s runs (and the budgets' baseline) analyzed as
    ``analyze`` does, each input on its own, and the budgets judged on their results;
    ``tell`` hears the notes saying which run or process each input was read at."""
    from xlaprof.budgets import evaluate
    from xlaprof.errors import BudgetError

    budgets.validate()
    if not request.inputs:
        raise BudgetError("no run to check")
    asked = request.but(warmup_steps=budgets.warmup_steps)
    results = [analyze(asked.but(inputs=(path,))) for path in asked.inputs]
    if budgets.baseline is not None:
        results.append(analyze(asked.but(inputs=(Path(budgets.baseline),), process=None)))
    for note in (note for result in results for note in result.notes):
        if tell is not None:
            tell(note)
    checked = [part for result in results[: len(asked.inputs)] for part in result.parts]
    baseline = None if budgets.baseline is None else results[-1].parts
    return evaluate(budgets, checked, baseline)


# -- the earlier entry points, kept for callers of the public API: each is one request now ----


def findings_of(
    paths: list[Path], warmup_steps: int = 2, source_root: Path | str | None = None
) -> list[Finding]:
    """The findings of every part of ``paths``, most severe first within each part."""
    request = AnalysisRequest(
        tuple(paths),
        warmup_steps=warmup_steps,
        source_root=None if source_root is None else Path(source_root),
    )
    return [f for result in analyze(request).parts for f in result.findings]


def analyze_one(
    path: Path,
    process: str | None = None,
    warmup_steps: int = 2,
    session: str | None = None,
    source_root: Path | str | None = None,
) -> tuple[PartResult, list[str], str | None]:
    """One process of ``path`` analyzed (``process``, else the latest run's first): its
    result, the names of every process found, and the notes on what was chosen."""
    request = AnalysisRequest(
        (Path(path),),
        process=process,
        warmup_steps=warmup_steps,
        session=session,
        source_root=None if source_root is None else Path(source_root),
    )
    result = analyze(request).one()
    return result.parts[0], result.processes, "; ".join(result.notes) or None


def compare_runs(
    before: Path, after: Path, source_root: Path | None = None
) -> tuple[RunComparison, list[str]]:
    """``compare`` of two paths with the default settings, and its notes."""
    request = AnalysisRequest((Path(before),), process=None, source_root=source_root)
    comparison = compare(request, request.but(inputs=(Path(after),)))
    return comparison, comparison.notes


def check_budgets(
    paths: list[Path], budgets: Budgets, source_root: Path | None = None
) -> CheckResult:
    """``check`` of ``paths`` with the default settings."""
    return check(AnalysisRequest(tuple(paths), process=None, source_root=source_root), budgets)
