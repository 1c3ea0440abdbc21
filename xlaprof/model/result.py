"""The result model: what the analysis of one part produced, as every renderer reads it.

``PartResult`` holds what the part was (``PartInfo``: its name, sources and run record), its
findings and the tables made for it (step timeline, host skew, per-host steps, stragglers, the
device model's tables, the run's own rows). It is closed: numbers, typed tables and findings
only, never the loaded run, analyzer input or trace; a pod's per-step rows that stay on disk
are named by its row store (``xlaprof.model.rowstore``: files and row counts), read when asked
for. Its methods return the tables as DataFrames (an empty frame where the input had nothing
to say), so the notebook facade, the HTML report, the MCP tools and the console show the same
tables without computing anything again.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from xlaprof.model.ondisk import BOTTLENECK, DEVICE_STEPS, HOST_STEPS, TRACING
from xlaprof.model.rowstore import RowStore

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.findings import Finding, KindCoverage
    from xlaprof.model.input import HostActivity
    from xlaprof.model.parts import RunSummary, SourceInfo

# The part of a step's time no measured part covers (``StepStory.parts``' key): never a cause.
UNATTRIBUTED = "unattributed"

FINDING_COLUMNS = [
    "severity",
    "kind",
    "title",
    "location",
    "location_is",
    "suggestion",
    "evidence",
    "cost",
]


@dataclass
class StepStory:
    """Where a run's steady step goes, as the console and HTML report open with it
    (``xlaprof.tables.story``). Seconds; None where not measured.

    ``median_step`` is the steady step (after warm-up, compiling nothing) of median wall time
    and ``parts`` its wall time by measured part (compile, tracing, transfer, device) and
    ``unattributed`` (the rest: never a cause), which add up to it; ``part_sources`` says where
    each measured part comes from and ``median_source`` whether the step was traced.
    ``bound`` is its largest measured part and ``bound_share`` that part's share;
    ``bound_steps`` counts the steady steps by bound. ``traced_steps`` are the steps a trace
    window covered and ``traced_compile_steps`` those of them that compiled (the window's
    device tables are then not steady-state). ``worth_most`` is the finding with the largest
    measured cost per step (set by the pipeline, which has the findings) and
    ``worth_most_basis`` how it was ranked, and ``worth_most_answer`` why its kind answers the
    bound (the kind's story sentence, from its registry entry; None where no bound picked it).
    ``host_xla_busy_s``: set only by documents of older versions (a capture's XLA ops on
    the host CPU, then not counted as device work).

    The step's time is what it cost the run, not when its sync returned (the host runs ahead
    of an asynchronous device): ``host_wall_s`` is the host's boundary-to-boundary time of the
    median step, ``host_cpu_s`` the stepping thread's work in it (its CPU time in a run; in a
    capture alone, the wall time of its runtime spans: ``host_measure`` says which), and
    ``host_blocked_s`` the time its sync was blocked on the device (no host work),
    ``host_cpu_wait_s`` the time its thread was ready to run but waited for a CPU (a busy
    machine: Linux's run-queue wait),
    ``transfer_s`` its host-device copies and reads (a read waits for the device first);
    ``overlap_s`` the measured work that ran hidden under the other side's and ``queue_s`` how
    long its executions waited behind earlier ones. ``ahead_max`` and ``ahead_median``: how
    many steps the host was ahead of the device when a step's graph was launched (the most, and
    the median over steady steps); ``drain_s``: after the last step's sync, how long the device
    took to finish what the host had queued (in the last step's time). ``untimed_steps``:
    the steps past warm-up compiling nothing whose time in the run was not measured (the run
    recorded its executions, but not all of these steps': their samples lost, or never seen
    completing), left out of the median and the verdict; ``lost_executions``: how many
    executions' samples torch_xla's window dropped before they were read.
    """

    steps: int
    warmup_steps: int
    steady_steps: int
    warmup_compile_s: float | None = None
    later_compile_steps: list[int] = field(default_factory=list)
    later_compile_s: float | None = None
    median_step: int | None = None
    median_wall_s: float | None = None
    parts: dict[str, float | None] = field(default_factory=dict)
    device_busy_s: float | None = None
    bound: str | None = None
    bound_share: float | None = None
    bound_steps: dict[str, int] = field(default_factory=dict)
    worth_most: Finding | None = None
    worth_most_answer: str | None = None
    median_source: str | None = None
    unattributed_s: float | None = None
    part_sources: dict[str, str] = field(default_factory=dict)
    traced_steps: list[int] = field(default_factory=list)
    traced_compile_steps: list[int] = field(default_factory=list)
    worth_most_basis: str | None = None
    host_xla_busy_s: float | None = None
    host_wall_s: float | None = None
    host_cpu_s: float | None = None
    # how ``host_cpu_s`` was measured: "cpu" (the stepping thread's CPU clock, a run) or
    # "spans" (the wall time of the thread's runtime spans, a capture alone)
    host_measure: str | None = None
    host_blocked_s: float | None = None
    host_cpu_wait_s: float | None = None
    transfer_s: float | None = None
    overlap_s: float | None = None
    queue_s: float | None = None
    ahead_max: int | None = None
    ahead_median: float | None = None
    drain_s: float | None = None
    untimed_steps: int | None = None
    lost_executions: int | None = None

    def to_json(self) -> dict[str, object]:
        """The ``story`` object of the ``--json`` document (docs/json-format.md)."""
        document = {k: v for k, v in self.__dict__.items() if k != "worth_most"}
        document["worth_most"] = None if self.worth_most is None else self.worth_most.to_json()
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> StepStory:
        """The story a saved ``--json`` document holds."""
        from xlaprof.findings import Finding

        known = {k: v for k, v in document.items() if k in cls.__dataclass_fields__}
        worth = known.pop("worth_most", None)
        story = cls(**known)
        story.worth_most = None if worth is None else Finding.from_json(worth)
        return story


# A device table's rows: numbers (seconds, shares of one, counts; None where not measured) and
# names, by column; a document of version 2 or older holds them as text (shown as they are).
Rows = list[dict[str, Any]]


@dataclass
class TracedSteps:
    """What the traced steps' time went to most (the one step model's bounds, ``tables/story``;
    a pod's from its workers' aggregates): the largest part (``bound``) of how many steps
    (``steps``) of those with a bound (``known``), whether the host's figure is lazy-tensor
    tracing (``lazy``: else the device's idle time), and the steps' medians (seconds)."""

    bound: str
    steps: int
    known: int
    lazy: bool
    median_busy_s: float | None
    median_tracing_s: float | None
    median_idle_s: float | None


# The notes an older document's device view holds as text (version 3 or before), by key.
DEVICE_WORDS = (
    "where",
    "meta",
    "capture",
    "device_types",
    "step_note",
    "autotune_note",
    "bottleneck_note",
    "line_note",
    "tracing_title",
    "verdict",
)


@dataclass
class DeviceView:
    """What the reports show of a capture's devices (``tables.device.view``): each table's
    rows as numbers, and what the notes around them say as facts: the hosts and sessions, the
    capture's files, events and devices (``host_cpu``: a capture without device planes counts
    the host CPU its XLA ops ran on), each device kind with its count, how steps were found
    where no Steps line or step markers gave them (``step_fallback``: ``module executions``
    or ``whole capture``), the compiler's autotuning work left out of the top ops
    (``autotune_*``: kernels, seconds and the first steps it ran in), how many per-step rows
    the tables leave out, the share of device op time with a user source line, whether the
    host figure is lazy tracing, and the traced steps' verdict (``traced``). Computed once by
    the pipeline; ``report.devices`` words them and writes the rows as text, and a saved result
    carries the view whole (an older document's notes as the text it holds: ``written``)."""

    session: str | None
    warnings: list[str]
    devices: Rows
    steps: Rows
    ops: Rows
    bottleneck_devices: Rows
    bottlenecks: Rows
    lines: Rows
    tracing: Rows
    tracing_hidden: int
    hosts: int = 0
    host: str | None = None  # the one host's name, where there is one
    sessions: list[str] = field(default_factory=list)
    capture_file: str | None = None  # the one file read, where there is one
    capture_files: int = 0
    events: int = 0
    device_count: int = 0
    host_cpu: bool = False
    device_kinds: list[tuple[str, int]] = field(default_factory=list)
    step_fallback: str | None = None
    autotune_kernels: int | None = None
    autotune_s: float | None = None
    autotune_steps: list[int] = field(default_factory=list)  # the first 9, smallest first
    bottleneck_hidden: int = 0
    line_coverage: float | None = None
    tracing_lazy: bool = False
    traced: TracedSteps | None = None
    written: dict[str, str | None] | None = None

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        document = {k: v for k, v in self.__dict__.items() if k not in ("traced", "written")}
        document["device_kinds"] = [list(kind) for kind in self.device_kinds]
        document["traced"] = None if self.traced is None else asdict(self.traced)
        document.update(self.written or {})
        return document

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> DeviceView:
        fields: dict[str, Any] = {
            name: document[name]
            for name in cls.__dataclass_fields__
            if name in document and name not in ("traced", "written")
        }
        fields["device_kinds"] = [tuple(kind) for kind in document.get("device_kinds") or []]
        traced = document.get("traced")
        fields["traced"] = None if traced is None else TracedSteps(**traced)
        if "meta" in document:  # version 3 or before: the notes as text
            fields["written"] = {name: document.get(name) for name in DEVICE_WORDS}
        return cls(**fields)


@dataclass
class HostView:
    """What the reports show of a capture's host where it has no device planes
    (``tables.host_steps.host_view``), made once by the pipeline so that every form agrees with
    the story: the host table's columns with a value in some step (``measured``; the others
    were not measured), the warm-up steps, the steady steps and the median one (the step
    model's, as the timeline marks them), and per kind (``python``, ``aten``) the hottest names
    with their mean self milliseconds per steady step, hottest first."""

    source: str
    device_planes: bool
    measured: list[str]
    warmup_steps: list[int]
    steady_steps: list[int]
    median_step: int | None
    hottest: dict[str, dict[str, float]]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> HostView:
        fields: dict[str, Any] = {name: document.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass
class CompileSummary:
    """A TORCH_TRACE compile table's totals as the reports head it
    (``tables.torch_compiles.compile_summary``): of the first rank's compiles (``rank``; None
    where the logs name none) out of ``ranks``, how many, recompiles, graph breaks, seconds
    compiling and cache hits and misses (None where not measured), and the failed ones."""

    rank: int | None
    ranks: int
    compiles: int
    recompiles: int
    graph_breaks: int
    seconds: float | None
    cache_hits: int | None
    cache_misses: int | None
    failed: int
    failed_kinds: list[str]

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> CompileSummary:
        fields: dict[str, Any] = {name: document.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass
class KeptRows:
    """What the finished result kept of a per-step table it cut to its bound
    (``tables.bounded``): how many rows there were in all and how many are kept, the steps
    they spanned, how the kept ones were chosen, and what the reports say of every row
    (``summary``: the stragglers' or host skew's one-line figures; None for other tables)."""

    total: int
    kept: int
    first_step: int | None
    last_step: int | None
    chosen: str
    summary: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> KeptRows:
        fields: dict[str, Any] = {name: document.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


@dataclass
class SteadyStep:
    """The steady state of a part's steps as ``xlaprof mcp``'s steps tool gives it, made once
    by the pipeline from every row of the timeline (``tables.timeline.steady_median``): how many
    steady steps there are (after warm-up, compiling nothing), the warm-up, the steady step of
    median wall time and that step's row (``median_s``: seconds by timeline column, and its
    ``ahead_steps``; None where not measured) and its largest part (``bound``)."""

    steps: int
    warmup_steps: int
    median_step: int
    median_s: dict[str, float | int | None]
    bound: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> SteadyStep:
        fields: dict[str, Any] = {name: document.get(name) for name in cls.__dataclass_fields__}
        fields["median_s"] = dict(fields["median_s"] or {})
        return cls(**fields)


@dataclass
class StepCount:
    """One recorded step's counts as the budgets read them (``xlaprof check``): compilations
    and their seconds, device-to-host reads, ``.item()`` reads and CPU-fallback calls."""

    step: int
    compiles: int
    compile_s: float
    reads: int
    scalar_reads: int
    fallback_calls: int


@dataclass
class CheckFigures:
    """What ``xlaprof check`` judges, measured once by the pipeline (``tables.check_figures``)
    so that budgets read numbers, not the input: the recorded steps' counts (``steps``: empty
    where none were recorded), whether a metrics report was read, the compile seconds it
    holds, the compilations a debug log lists, how many distinct hashes they had and whether
    each had one, the run directory and its recorded status."""

    steps: list[StepCount]
    has_reports: bool
    report_compile_s: float | None
    logged_compilations: int
    graph_hashes: int
    all_hashed: bool
    run_path: str | None
    run_status: str | None

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> CheckFigures:
        fields = dict(document)
        fields["steps"] = [StepCount(**row) for row in document.get("steps") or []]
        return cls(**fields)


@dataclass
class PartInfo:
    """What one analyzed part was, as every output names it: its name (a process run's, or
    "files"), what was read (``sources``), its run record (``run_summary``, a run directory's
    ``run.json``) and folder (``run_path``), the path a capture was given as
    (``trace_path``), the warm-up steps it was analyzed with, whether it was a capture alone
    (``trace_only``: device tables, and no report, log or run for the analyzers), and of its
    profiler trace (``traced``: it had one, a capture or a run's trace window): the hosts, the
    session analyzed of every session found, and what was wrong with the capture."""

    name: str
    sources: list[SourceInfo] = field(default_factory=list)
    run_summary: RunSummary | None = None
    trace_path: str | None = None
    run_path: str | None = None
    warmup_steps: int = 2
    trace_only: bool = False
    traced: bool = False
    hosts: list[str] = field(default_factory=list)
    session: str | None = None
    sessions: list[str] = field(default_factory=list)
    trace_warnings: list[str] = field(default_factory=list)


@dataclass
class PartResult:
    """One part analyzed (``xlaprof.pipeline.analyze``), finished: everything a renderer shows."""

    part: PartInfo
    findings: list[Finding]
    timeline: pd.DataFrame | None = None
    host_skew: pd.DataFrame | None = None
    # several hosts: one row per (host, device, step) (a pod's stay on disk: None here, named
    # by ``store`` and read by ``host_steps_frame``), and the stragglers among them
    host_steps: pd.DataFrame | None = None
    stragglers: pd.DataFrame | None = None
    # The step model's summary: where a steady step goes (tables/story.py).
    story: StepStory | None = None
    # The steady step and its row, of every step's row (None: no steady step measured).
    steady: SteadyStep | None = None
    # The part's figures as diff, check, MCP and the notebook quote them
    # (``tables.compare.run_summary``, its median step the story's): set by the pipeline.
    figures: dict[str, Any] = field(default_factory=dict)
    # The capture's device section as the reports show it (``tables.device.view``).
    devices: DeviceView | None = None
    # The counts every report heads the part with, and the tables its figures draw (the
    # run's per-step rows, compilations, region totals, top ops, device steps, one device's
    # per-host steps): made by the pipeline, so no renderer reads a file.
    counts: Counts | None = None
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    # The ``trace`` object of the ``--json`` document (``tables.document.trace_json``).
    trace_json: dict[str, Any] | None = None
    # A capture alone (no report, log or run): set where the part has no trace (read back).
    capture_only: bool | None = None
    # The document this result was read from (``from_json``): written again as it was.
    saved: dict[str, Any] | None = field(default=None, repr=False)
    # For each finding kind, in registry order: found, measured and found nothing, or not
    # measured and why (``xlaprof.analyzers.examine``).
    analyzers: list[KindCoverage] = field(default_factory=list)
    # A capture without device planes: the host's time per step and hottest functions
    # (tables/host_steps.py), and what the reports show of them (``host_view``); TORCH_TRACE
    # logs: one row per compile (tables/torch_compiles.py) and their totals.
    host_activity: HostActivity | None = None
    host_view: HostView | None = None
    torch_compiles: pd.DataFrame | None = None
    compile_summary: CompileSummary | None = None
    # The per-step tables cut to their bound (``tables.bounded``; the timeline, stragglers,
    # host skew, per-host steps, the heat map's frame): what each had in all and how the kept
    # rows were chosen (``rows_kept`` in ``--json``). Empty where nothing was cut.
    rows_kept: dict[str, KeptRows] = field(default_factory=dict)
    # What the reports say of every row of the stragglers and the host skew (the console's one
    # line each: ``tables.bounded.straggler_summary``/``skew_summary``), by table name, made
    # by the pipeline wherever the table is, cut or not (``summaries`` in ``--json``).
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Those tables before they were cut, for the notebook (``Analysis.timeline()``,
    # ``stragglers()``, ``host_skew()``: every row): held in memory only, never written.
    every_row: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    # What ``xlaprof check`` judges (``CheckFigures``), made by the pipeline.
    checked: CheckFigures | None = None
    # A result read back from a saved ``--json`` document (``inputs.saved``): the file read
    # (every output names it, not the run it was made from).
    read_from: str | None = None
    # Tables held whole for the notebook and the MCP tools, in memory only, never written: the
    # run's own rows (``steps``, ``events``, ``compiles``, ``regions``) and the trace's device
    # model (``device_steps``, ``device_ops``, ``device_utilization``, ``devices``, ``tracing``,
    # ``bottlenecks``, ``lines``, ``line_totals``) where it holds them in memory.
    whole: dict[str, pd.DataFrame] = field(default_factory=dict, repr=False)
    # The document's ``reports`` and ``debug_events``: the metrics reports and the PT_XLA_DEBUG
    # events read, as JSON (``tables.document.report_json``/``event_json``).
    reports_json: list[dict[str, Any]] = field(default_factory=list, repr=False)
    events_json: list[dict[str, Any]] = field(default_factory=list, repr=False)
    # A pod's per-step tables left on disk (device steps, tracing, bottlenecks, the per-host
    # steps): where they are, read when asked for (empty: every row is in memory).
    store: RowStore = field(default_factory=RowStore, repr=False)

    @property
    def trace_only(self) -> bool:
        """A capture alone: device tables, and no report, log or run for the analyzers."""
        return self.part.trace_only if self.capture_only is None else self.capture_only

    def frame(self, name: str) -> pd.DataFrame | None:
        """One of the tables the pipeline made for the figures, or None."""
        return self.frames.get(name)

    # Tables of the result, as a saved document holds them (``view`` key of ``--json``).
    TABLES = ("timeline", "host_skew", "host_steps", "stragglers")

    def view_json(self) -> dict[str, Any]:
        """What the renderers read beyond the ``--json`` contract's keys: the device view,
        the counts, the figures' tables and the part's figures (``view`` in the document)."""
        tables = {name: getattr(self, name) for name in self.TABLES}
        tables.update({f"frame:{name}": frame for name, frame in self.frames.items()})
        activity = self.host_activity
        if activity is not None:
            tables.update({"host_activity": activity.steps, "host_hot": activity.hot})
        tables["torch_compiles"] = self.torch_compiles
        return {
            "name": self.part.name,
            "trace_path": self.part.trace_path,
            "trace_only": self.trace_only,
            "counts": None if self.counts is None else self.counts.to_json(),
            "devices": None if self.devices is None else self.devices.to_json(),
            "figures": self.figures,
            "tables": {k: frame_to_json(v) for k, v in tables.items() if v is not None},
            "host_activity": None
            if activity is None
            else {"source": activity.source, "device_planes": activity.device_planes},
            "host_view": None if self.host_view is None else self.host_view.to_json(),
            "compile_summary": None
            if self.compile_summary is None
            else self.compile_summary.to_json(),
            "check": None if self.checked is None else self.checked.to_json(),
            "steady": None if self.steady is None else self.steady.to_json(),
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> PartResult:
        """A part's result from its ``--json`` document (one of ``processes``, or the whole
        document of one part): what the renderers show, without the trace or the run."""
        from xlaprof.findings import Finding, KindCoverage
        from xlaprof.model.input import HostActivity
        from xlaprof.model.parts import RunSummary, SourceInfo
        from xlaprof.parse.metrics_report import ParseWarning

        view = document.get("view") or {}
        counts = Counts.from_json(view["counts"]) if view.get("counts") else None
        rows_kept = {
            name: KeptRows.from_json(kept)
            for name, kept in (document.get("rows_kept") or {}).items()
        }
        sources = [
            SourceInfo(
                path=s["path"],
                kinds=list(s["kinds"]),
                reports=s["reports"],
                debug_events=s["debug_events"],
                warnings=[ParseWarning(**w) for w in s["warnings"]],
            )
            for s in document.get("sources", [])
        ]
        run = document.get("run")
        part = PartInfo(
            name=view.get("name") or "files",
            sources=sources,
            run_summary=None if run is None else RunSummary(**run),
            trace_path=view.get("trace_path"),
            run_path=None if run is None else run.get("path"),
            warmup_steps=2 if counts is None else counts.warmup_steps,
            trace_only=bool(view.get("trace_only")),
            traced=document.get("trace") is not None,
        )
        tables = {k: frame_from_json(v) for k, v in (view.get("tables") or {}).items()}
        story = document.get("story")
        devices = view.get("devices")
        activity = view.get("host_activity")
        host_view = view.get("host_view")
        compile_summary = view.get("compile_summary")
        checked = view.get("check")
        steady = view.get("steady")
        return cls(
            part=part,
            findings=[Finding.from_json(f) for f in document.get("findings", [])],
            timeline=tables.get("timeline"),
            host_skew=tables.get("host_skew"),
            host_steps=tables.get("host_steps"),
            stragglers=tables.get("stragglers"),
            story=None if story is None else StepStory.from_json(story),
            steady=None if steady is None else SteadyStep.from_json(steady),
            figures=dict(view.get("figures") or {}),
            devices=None if devices is None else DeviceView.from_json(devices),
            counts=counts,
            frames={
                k.removeprefix("frame:"): v for k, v in tables.items() if k.startswith("frame:")
            },
            capture_only=bool(view.get("trace_only")),
            saved=document,
            analyzers=[KindCoverage.from_json(e) for e in document.get("analyzers") or []],
            host_activity=None
            if activity is None
            else HostActivity(
                source=activity["source"],
                steps=tables["host_activity"],
                hot=tables["host_hot"],
                device_planes=bool(activity["device_planes"]),
            ),
            host_view=None if host_view is None else HostView.from_json(host_view),
            torch_compiles=tables.get("torch_compiles"),
            compile_summary=None
            if compile_summary is None
            else CompileSummary.from_json(compile_summary),
            rows_kept=rows_kept,
            summaries=_summaries_of(document.get("summaries"), rows_kept),
            checked=None if checked is None else CheckFigures.from_json(checked),
        )

    def findings_frame(self) -> pd.DataFrame:
        """One row per finding: severity, kind, title, location (``file:line``) and what that
        line is (``location_is``: ``Location.what``), suggestion, evidence, and
        (added) cost: ``Cost.to_json()`` where measured, else None."""
        import pandas as pd

        rows = [
            {
                "severity": f.severity.value,
                "kind": f.kind.value,
                "title": f.title,
                "location": None if f.location is None else str(f.location),
                "location_is": None if f.location is None else f.location.what,
                "suggestion": f.suggestion,
                "evidence": f.evidence,
                "cost": None if f.cost is None else f.cost.to_json(),
            }
            for f in self.findings
        ]
        return pd.DataFrame(rows, columns=FINDING_COLUMNS)

    def rows(self, name: str) -> pd.DataFrame | None:
        """Every row of per-step table ``name`` (``timeline``, ``stragglers``, ``host_skew``,
        ``host_steps``) where this result holds them, else the rows it kept (None: no such
        table): what a reader paging through the whole table reads (``xlaprof mcp``)."""
        table: pd.DataFrame | None = self.every_row.get(name, getattr(self, name))
        return table

    def timeline_frame(self) -> pd.DataFrame:
        """Every step's row (a result read back from ``--json``: the rows it kept)."""
        return _or_empty(self.every_row.get("timeline", self.timeline))

    def host_skew_frame(self) -> pd.DataFrame:
        return _or_empty(self.every_row.get("host_skew", self.host_skew))

    def host_steps_frame(self) -> pd.DataFrame:
        """Several hosts: one row per (host, device, step); a pod's are read from its row
        store (the heat map's device is in ``frames``)."""
        if self.host_steps is None and HOST_STEPS in self.store:
            return self.store.read(HOST_STEPS)
        return _or_empty(self.every_row.get("host_steps", self.host_steps))

    def stragglers_frame(self) -> pd.DataFrame:
        return _or_empty(self.every_row.get("stragglers", self.stragglers))

    def host_activity_frame(self) -> pd.DataFrame:
        return _or_empty(None if self.host_activity is None else self.host_activity.steps)

    def host_hot_frame(self) -> pd.DataFrame:
        return _or_empty(None if self.host_activity is None else self.host_activity.hot)

    def torch_compiles_frame(self) -> pd.DataFrame:
        return _or_empty(self.torch_compiles)

    def table(self, name: str) -> pd.DataFrame | None:
        """Every row of table ``name`` held whole (``whole``) or named by the row store (read
        now; the device model's per-step tables of a pod), else None (not measured here)."""
        if name in self.whole:
            return self.whole[name]
        stored = STORED_AS.get(name)
        if stored is not None and stored in self.store:
            return self.store.read(stored)
        return None

    def count(self, name: str) -> int | None:
        """How many rows table ``name`` has (as ``table``), a stored one's counted, not read."""
        if name in self.whole:
            return len(self.whole[name])
        stored = STORED_AS.get(name)
        if stored is not None and stored in self.store:
            return self.store.count(stored)
        return None

    def device_steps(self) -> pd.DataFrame:
        return _or_empty(self.table("device_steps"))

    def device_ops(self) -> pd.DataFrame:
        return _or_empty(self.table("device_ops"))

    def device_utilization(self) -> pd.DataFrame:
        return _or_empty(self.table("device_utilization"))

    def tracing_vs_device(self) -> pd.DataFrame:
        return _or_empty(self.table("tracing"))

    def bottlenecks(self) -> pd.DataFrame:
        return _or_empty(self.table("bottlenecks"))

    def device_time_by_line(self, per_device: bool = False) -> pd.DataFrame:
        return _or_empty(self.table("lines" if per_device else "line_totals"))


# The row store's names (``xlaprof.model.ondisk.TABLES``) of the tables ``PartResult.table``
# reads from it, by the result's names.
STORED_AS = {
    "device_steps": DEVICE_STEPS,
    "tracing": TRACING,
    "bottlenecks": BOTTLENECK,
    "host_steps": HOST_STEPS,
}


def _empty() -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame()


def _or_empty(frame: pd.DataFrame | None) -> pd.DataFrame:
    return frame if frame is not None else _empty()


@dataclass
class AnalysisResult:
    """One analysis (``xlaprof.pipeline.analyze``): every part it read, in input order, the
    names of every process run found, and the notes saying which were chosen."""

    parts: list[PartResult]
    processes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The parts' counts summed (several processes), as the document heads them.
    totals: Counts | None = None

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> AnalysisResult:
        """The result a ``--json`` document (``xlaprof.analysis/1``) holds: each process's
        part, as the renderers show it."""
        documents = document.get("processes") or [document]
        view = document.get("view") or {}
        several = "processes" in document and "summary" in document
        return cls(
            [PartResult.from_json(d) for d in documents],
            processes=list(view.get("processes") or []),
            notes=list(view.get("notes") or []),
            totals=Counts.from_summary(document["summary"]) if several else None,
        )

    def saved_note(self) -> str | None:
        """The line every output shows of a result read back from a saved document: the file
        read, and what it was made from (None: measured, not read back)."""
        read = next((p.read_from for p in self.parts if p.read_from is not None), None)
        if read is None:
            return None
        made = sorted({s.path for p in self.parts for s in p.part.sources})
        listed = ", ".join(made[:3]) + (", ..." if len(made) > 3 else "")
        of = f" (made from {listed})" if made else ""
        return f"read a saved result: {read}{of}; nothing was measured again"

    def measured_notes(self) -> list[str]:
        """The notes on what was analyzed, without the one saying it was read back (a document
        written again from a saved result holds the notes it was saved with)."""
        said = self.saved_note()
        return [note for note in self.notes if note != said]

    def one(self) -> AnalysisResult:
        """This result with its first part only (``report``, ``diff``, the notebook), and a
        note naming it when there were several."""
        if len(self.parts) <= 1:
            return self
        names = [p.part.name for p in self.parts]
        note = (
            f"{len(names)} process runs ({', '.join(names[:8])}"
            f"{', ...' if len(names) > 8 else ''}): showing {names[0]} only; "
            "--process NAME (process=NAME) for another"
        )
        return AnalysisResult(self.parts[:1], self.processes, [*self.notes, note], None)


@dataclass
class RunComparison:
    """``xlaprof diff``: two runs' figures side by side (``xlaprof.tables.compare``) and the
    titles of findings that disappeared and appeared."""

    before: str
    after: str
    table: pd.DataFrame
    gone: list[str]
    came: list[str]
    notes: list[str] = field(default_factory=list)
    # the two analyses compared (not part of the document)
    sides: tuple[AnalysisResult, AnalysisResult] | None = None


# -- the finished result, saved and read back ----------------------------------------------


def frame_to_json(frame: pd.DataFrame) -> dict[str, Any]:
    """A table as ``{"columns", "dtypes", "rows"}``: not measured as null, numbers as JSON
    numbers, and each column's type, so ``frame_from_json`` gives back the same table."""
    import math

    columns = [str(c) for c in frame.columns]
    values = []
    for column in frame.columns:
        cells: list[Any] = []
        for value in frame[column].tolist():
            if (
                value is None
                or type(value).__name__ in ("NAType", "NaTType")
                or (isinstance(value, float) and not math.isfinite(value))
            ):
                cells.append(None)
            elif hasattr(value, "item"):
                cells.append(value.item())
            else:
                cells.append(value)
        values.append(cells)
    rows = [list(row) for row in zip(*values, strict=True)] if values else []
    dtypes = [str(frame[c].dtype) for c in frame.columns]
    return {"columns": columns, "dtypes": dtypes, "rows": rows}


def frame_from_json(document: dict[str, Any]) -> pd.DataFrame:
    """The table ``frame_to_json`` wrote, with its columns' types."""
    import pandas as pd

    columns = list(document.get("columns") or [])
    frame = pd.DataFrame(document.get("rows") or [], columns=columns)
    for column, dtype in zip(columns, document.get("dtypes") or [], strict=False):
        if str(frame[column].dtype) == dtype:
            continue
        try:
            frame[column] = frame[column].astype(dtype)
        except (TypeError, ValueError, OverflowError):
            continue  # a type the values no longer fit (ints with a gap): kept as read
    return frame


def normal_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` as a saved result reads it back: what renderers draw, the same either way."""
    return frame_from_json(frame_to_json(frame))


@dataclass
class Counts:
    """The part's counts as every report heads it (``AnalysisInput``'s, once): steps,
    compilations, executions, device-to-host transfers, CPU fallbacks by op (and the ops a
    log only names), and whether counters were measured at all."""

    steps: int | None
    compiles: int | None
    executions: int | None
    device_to_host_transfers: int | None
    aten_fallbacks: dict[str, int | None]
    fallbacks_named: str
    measured: bool
    warmup_steps: int

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def total(cls, parts: list[Counts]) -> Counts:
        """Several processes' counts summed (a count none measured stays None; fallback
        counts by op), as the document of a folder of process runs heads them."""

        def summed(values: list[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        fallbacks: dict[str, int | None] = {}
        for counts in parts:
            for name, value in counts.aten_fallbacks.items():
                fallbacks[name] = (fallbacks.get(name) or 0) + (value or 0)
        return cls(
            steps=summed([c.steps for c in parts]),
            compiles=summed([c.compiles for c in parts]),
            executions=summed([c.executions for c in parts]),
            device_to_host_transfers=summed([c.device_to_host_transfers for c in parts]),
            aten_fallbacks=fallbacks,
            fallbacks_named=", ".join(c.fallbacks_named for c in parts if c.fallbacks_named),
            measured=any(c.measured for c in parts),
            warmup_steps=parts[0].warmup_steps if parts else 2,
        )

    @classmethod
    def from_summary(cls, summary: dict[str, Any]) -> Counts:
        """The counts a document's ``summary`` holds (the contract's keys)."""
        return cls(
            steps=summary.get("steps"),
            compiles=summary.get("compiles"),
            executions=summary.get("executions"),
            device_to_host_transfers=summary.get("device_to_host_transfers"),
            aten_fallbacks=dict(summary.get("aten_fallbacks") or {}),
            fallbacks_named="",
            measured=True,
            warmup_steps=2,
        )

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> Counts:
        fields: dict[str, Any] = {name: document.get(name) for name in cls.__dataclass_fields__}
        return cls(**fields)


def _summaries_of(
    saved: dict[str, Any] | None, rows_kept: dict[str, KeptRows]
) -> dict[str, dict[str, Any]]:
    """A saved document's ``summaries``; one written before that key has those of the tables
    it cut (``rows_kept``), and the reader of saved documents adds the others
    (``inputs.saved.load_saved``)."""
    if saved is not None:
        return {name: dict(figures) for name, figures in saved.items() if figures is not None}
    return {
        name: dict(kept.summary) for name, kept in rows_kept.items() if kept.summary is not None
    }
