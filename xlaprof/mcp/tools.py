"""The tools of ``xlaprof mcp``, as plain methods: typed arguments in, typed models out.

Each analysis is ``xlaprof.pipeline.analyze`` of the request ``Tools.request`` makes, as in
``xlaprof analyze``, and its answer is cut from ``results_document`` (the ``--json``
document) or, for tables the document keeps only the head of, paged with ``records`` (the
document's own row writer): the numbers an agent gets are those the CLI prints. An analysis is
kept (``CACHED_ANALYSES``) while its input's files, sizes and times stay the same, so paging
through a table does not analyze again.

Paths go through ``Roots`` (``roots.py``) first: nothing outside the folders given with
``--root`` is read, and source lines are quoted only from files under them. Errors are the
``XlaprofError`` the CLI would raise; ``server.py`` turns them into MCP tool errors.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from xlaprof.errors import (
    InputNotFound,
    InputNotRecognized,
    OutsideRoots,
    RunDirError,
    ServerBusy,
)
from xlaprof.mcp import models
from xlaprof.mcp.roots import Roots, source_root_for
from xlaprof.model.request import PodSettings

if TYPE_CHECKING:
    import pandas as pd

    from xlaprof.model.parts import Part
    from xlaprof.model.request import AnalysisRequest
    from xlaprof.model.result import PartResult

# Analyses kept for paging (a pod's can hold a few hundred MB: a handful at most).
CACHED_ANALYSES = 4
# Rows one call may ask for; findings one analyze answer shows by default.
MAX_ROWS = 500
DEFAULT_ROWS = 20
DEFAULT_FINDINGS = 20
# Items of the overview's lists (devices, top ops, source warnings) before "see the tool".
OVERVIEW_DEVICES = 16
OVERVIEW_TOP_OPS = 10
OVERVIEW_WARNINGS = 5
# How long a call waits for the one before it to end: past this it answers ServerBusy instead
# of waiting on (a call that never ends then holds the server for itself only).
BUSY_WAIT_SECONDS = 300.0
# What a script or benchmark run hands back of its own output.
OUTPUT_TAIL_CHARS = 4000
# The docs pages of the analyzers, where the package runs from a checkout.
DOCS = Path(__file__).resolve().parents[2] / "docs" / "analyzers"

# The per-step tables and the op views the tools page through (their schemas list them).
StepTable = Literal[
    "timeline",
    "device_steps",
    "tracing",
    "stragglers",
    "host_steps",
    "host_skew",
    "host_activity",
    "host_hot",
    "torch_compiles",
]
OpView = Literal["ops", "top_ops"]

# Argument types, documented once: their descriptions are the tools' input schemas.
PathArg = Annotated[
    str,
    Field(
        description="A run directory, a folder of process runs, a capture (.xplane.pb, "
        "*trace.json.gz) or capture logdir, or a metrics report / PT_XLA_DEBUG log; absolute, "
        "or relative to a root. list_inputs shows what there is."
    ),
]
ProcessArg = Annotated[
    str | None,
    Field(description="For a folder of several process runs: which one (default: the first)."),
]
SessionArg = Annotated[
    str | None,
    Field(description="For a logdir of several profiling sessions: which (default: latest)."),
]
WarmupArg = Annotated[
    int,
    Field(
        ge=0, description="How many steps are warm-up: the first N the input holds, by position."
    ),
]
OffsetArg = Annotated[int, Field(ge=0, description="First row to return (paging).")]
LimitArg = Annotated[int, Field(ge=1, le=MAX_ROWS, description="Rows to return at most.")]
HostArg = Annotated[str | None, Field(description="Only rows of this host.")]
DeviceArg = Annotated[str | None, Field(description="Only rows of this device (e.g. TPU:0).")]


@dataclass(frozen=True)
class Settings:
    """How the server was started: ``allow_run`` adds run_script and bench_fix, each capped at
    ``max_run_steps`` steps and ``run_timeout_s`` seconds; ``pod``: how a capture of several
    hosts is read, as the environment the server started in sets it (``xlaprof mcp`` reads it)."""

    allow_run: bool = False
    max_run_steps: int = 50
    run_timeout_s: float = 600.0
    pod: PodSettings = field(default_factory=PodSettings)


@dataclass
class Analyzed:
    """One input analyzed: every part's result and the ``--json`` document of them all."""

    path: Path
    results: list[PartResult]
    document: dict[str, Any]
    notes: list[str] = field(default_factory=list)  # which run was read, of several

    def part(self, process: str | None) -> tuple[PartResult, dict[str, Any], list[str]]:
        """One part's result and document (the first, or ``process``), with a note when the
        input held several."""
        names = [r.part.name for r in self.results]
        index = 0
        if process is not None:
            if process not in names:
                raise RunDirError(
                    f"{self.path}: no process run named {process!r} (there are: "
                    f"{', '.join(names[:8])}{', ...' if len(names) > 8 else ''})"
                )
            index = names.index(process)
        if len(self.results) == 1:
            return self.results[0], self.document, list(self.notes)
        notes = list(self.notes)
        if process is None:
            notes.append(
                f"{self.path} holds {len(names)} process runs ({', '.join(names[:8])}"
                f"{', ...' if len(names) > 8 else ''}): showing {names[0]}; pass process=NAME "
                "for another"
            )
        return self.results[index], self.document["processes"][index], notes


class Tools:
    """The tools over ``roots``. Calls are served one at a time (``lock``): an analysis reads
    only its own source files (inside the roots), and the machine it runs on is usually a laptop."""

    def __init__(self, roots: Roots, settings: Settings | None = None) -> None:
        self.roots = roots
        self.settings = settings or Settings()
        self.lock = threading.Lock()
        self._cache: OrderedDict[tuple[Any, ...], Analyzed] = OrderedDict()

    def tools(self) -> list[Any]:
        """The tool methods this server offers, in the order listed."""
        offered: list[Any] = [
            self.list_inputs,
            self.analyze,
            self.steps,
            self.device_ops,
            self.compare_runs,
            self.check_budgets,
            self.explain_finding,
        ]
        if self.settings.allow_run:
            offered += [self.run_script, self.bench_fix]
        return offered

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """The server for one call: ``lock`` within ``BUSY_WAIT_SECONDS``, else ``ServerBusy``
        (a later call is answered, never queued behind one that does not end)."""
        if not self.lock.acquire(timeout=BUSY_WAIT_SECONDS):
            raise ServerBusy(
                f"another call has held the server for over {BUSY_WAIT_SECONDS:.0f} s; try "
                "again later"
            )
        try:
            yield
        finally:
            self.lock.release()

    # -- the analysis, once per input ---------------------------------------------------------
    def analysis(
        self,
        path: str,
        session: str | None = None,
        warmup_steps: int = 2,
        process: str | None = None,
    ) -> Analyzed:
        """``path`` analyzed as ``xlaprof analyze`` does (its latest run, or ``process``),
        reused while it has not changed."""
        real, fingerprint = self.roots.resolve_input(path)
        key = (str(real), session, warmup_steps, process, fingerprint)
        if key in self._cache:
            self._cache.move_to_end(key)
            return self._cache[key]
        analyzed = self._analyze(self.request(real, session, warmup_steps, process))
        self._cache[key] = analyzed
        while len(self._cache) > CACHED_ANALYSES:
            self._cache.popitem(last=False)
        return analyzed

    def request(
        self,
        path: Path,
        session: str | None = None,
        warmup_steps: int = 2,
        process: str | None = None,
    ) -> AnalysisRequest:
        """The request a tool makes of ``path``: source lines from inside the roots only."""
        from xlaprof.model.request import AnalysisRequest

        return AnalysisRequest(
            (path,),
            process=process,
            session=session,
            warmup_steps=warmup_steps,
            source_root_of=self.source_root,
            pod=self.settings.pod,
        )

    def _analyze(self, request: AnalysisRequest) -> Analyzed:
        from xlaprof.pipeline import analyze
        from xlaprof.report.json_out import results_document

        result = analyze(request)
        document = results_document(result.parts, result.totals)
        return Analyzed(request.inputs[0], result.parts, document, result.notes)

    def source_root(self, part: Part) -> Path:
        """Where findings on ``part`` may quote source lines from: its run's recorded working
        directory when that lies inside the roots, else the root holding the part."""
        from xlaprof.pipeline import recorded_root_of

        recorded = recorded_root_of(part)
        where = part.run.path if part.run is not None else Path(part.sources[0].path)
        return source_root_for(self.roots, where.resolve(), recorded)

    # -- tools ----------------------------------------------------------------------------------
    def list_inputs(
        self,
        under: Annotated[
            str | None, Field(description="A folder inside the roots (default: every root).")
        ] = None,
        offset: OffsetArg = 0,
        limit: Annotated[int, Field(ge=1, le=MAX_ROWS, description="Entries at most.")] = 50,
    ) -> models.ListOutput:
        """List what can be analyzed under the allowed folders: run directories (from `xlaprof
        run`), profiler captures and capture logdirs, and logs holding a metrics report or
        PT_XLA_DEBUG output, each with its kind, size and latest change. Start here."""
        folder = None if under is None else self.roots.resolve(under)
        found = self.roots.inventory(folder)
        page = found.entries[offset : offset + limit]
        return models.ListOutput(
            roots=[str(r) for r in self.roots.paths],
            total=len(found.entries),
            offset=offset,
            next_offset=_next(offset, len(page), len(found.entries)),
            truncated=found.truncated,
            entries=[models.InputEntry(**vars(e)) for e in page],
        )

    def analyze(
        self,
        path: PathArg,
        process: ProcessArg = None,
        session: SessionArg = None,
        warmup_steps: WarmupArg = 2,
        max_findings: Annotated[
            int, Field(ge=0, le=MAX_ROWS, description="Findings to return at most.")
        ] = DEFAULT_FINDINGS,
    ) -> models.AnalyzeOutput:
        """Diagnose one input, as `xlaprof analyze --json` does: the counts (compilations,
        executions, host transfers, CPU fallbacks, steps), the findings most severe first (kind,
        title, the user's source line, the evidence and the fix), the run's status, the
        capture's devices and top ops, and how many rows each per-step and per-op table has
        (page through them with steps and device_ops). Without process, a folder of several
        process runs is analyzed whole (findings tagged with evidence.process)."""
        analyzed = self.analysis(path, session, warmup_steps, process)
        return self._overview(analyzed, process, max_findings)

    def _overview(
        self, analyzed: Analyzed, process: str | None, max_findings: int
    ) -> models.AnalyzeOutput:
        notes: list[str] = list(analyzed.notes)
        if process is None:
            document = analyzed.document
            result = analyzed.results[0] if len(analyzed.results) == 1 else None
        else:
            result, document, notes = analyzed.part(process)  # its notes include the run's
        for part in (r.part for r in (analyzed.results if result is None else [result])):
            if len(part.sessions) > 1:
                notes.append(
                    f"{len(part.sessions)} profiling sessions; analyzed "
                    f"{part.session or '.'} (session=NAME for another)"
                )
        if result is None:
            notes.append(
                f"{len(analyzed.results)} process runs analyzed together: pass process=NAME "
                "for one's run record, trace and tables"
            )
        findings = document["findings"]
        trace = document.get("trace")
        return models.AnalyzeOutput(
            schema=document["schema"],
            path=str(analyzed.path),
            processes=[r.part.name for r in analyzed.results],
            process=process,
            notes=notes,
            summary=models.Summary(**document["summary"]),
            findings=[models.FindingOut(**f) for f in findings[:max_findings]],
            findings_total=len(findings),
            run=document.get("run"),
            trace=None if trace is None else _trace_overview(trace),
            tables=_table_sizes(result) if result is not None else {},
            sources=[_source(s) for s in document["sources"]],
        )

    # The parameters are the tool's arguments: the SDK reads them as its input schema.
    def steps(  # noqa: PLR0913
        self,
        path: PathArg,
        table: Annotated[
            StepTable,
            Field(
                description="timeline: what each step cost the run and where its time went "
                "(wall_s: the step's time in the run, until its host and device work had both "
                "ended, the host running ahead of the device; host_wall_s: sync to sync; "
                "python_tracing_s, tracing_s, graph_build_s, compile_s, transfer_s, "
                "device_wait_s, device_busy_s: the device's own busy time on the step's "
                "executions, device_idle_s, queue_s, ahead_steps; source trace|metrics); "
                "device_steps: per device and step (busy, idle, duty, seconds per op "
                "category); tracing: per host step, host tracing against device busy and what "
                "bounds it; stragglers: per step and device of a pod, the slowest host and "
                "why; host_steps: per host, device and step (pods); host_skew: per step, "
                "fastest and slowest host; host_activity: a capture without device planes, "
                "per step the host's ms by what it did (compile, read, wait, aten, python, "
                "other, unrecorded); host_hot: its hottest Python functions and aten ops per "
                "step (self ms); torch_compiles: a TORCH_TRACE log's compiles (function, step, "
                "seconds, dynamo's reason, graph breaks, cache hits/misses, failure)."
            ),
        ] = "timeline",
        process: ProcessArg = None,
        session: SessionArg = None,
        warmup_steps: WarmupArg = 2,
        host: HostArg = None,
        device: DeviceArg = None,
        offset: OffsetArg = 0,
        limit: LimitArg = DEFAULT_ROWS,
    ) -> models.StepsOutput:
        """The story of the steps: the steady state (the steady step of median time in the run,
        its figures: Python and tracing, graph build, compile, transfers, device wait, device
        busy and idle, queue, run-ahead, its parts and bound), the trace's verdict on what
        bounds the steps, and the rows of one per-step table, a page at a time. Seconds
        throughout; null where not measured."""
        result, _, notes = self.analysis(path, session, warmup_steps, process).part(process)
        frame = _step_tables(result).get(table)
        steady = None
        held = result.steady  # the pipeline's, of every step's row
        if table == "timeline" and frame is not None and len(frame) and held is not None:
            steady = models.SteadyState(
                steps=held.steps,
                warmup_steps=held.warmup_steps,
                median_step=held.median_step,
                median_s=dict(held.median_s),
                bound=held.bound,
            )
        from xlaprof.report.devices import device_words

        verdict = None if result.devices is None else device_words(result.devices).verdict
        if frame is None:
            notes.append(_absent(table))
        page = _page(frame, host, device, offset, limit)
        return models.StepsOutput(
            path=str(result.part.sources[0].path if result.part.sources else path),
            process=result.part.name,
            table=table,
            notes=notes,
            steady=steady,
            verdict=verdict,
            **page,
        )

    def device_ops(
        self,
        path: PathArg,
        view: Annotated[
            OpView,
            Field(
                description="ops: per device and op, longest first (name, category, "
                "occurrences, total_s, self_s, flops, bytes_accessed, rates, bound); "
                "top_ops: summed over devices."
            ),
        ] = "ops",
        process: ProcessArg = None,
        session: SessionArg = None,
        host: HostArg = None,
        device: DeviceArg = None,
        offset: OffsetArg = 0,
        limit: LimitArg = DEFAULT_ROWS,
    ) -> models.DeviceOpsOutput:
        """Where device time went in a capture (or a run's trace window): each device's busy
        and idle time and op categories, and its ops by time, a page at a time. The first 100
        ops are those of `xlaprof analyze --json`'s trace.device_ops; paging goes past them."""
        from xlaprof.report.json_out import records

        result, _, notes = self.analysis(path, session, process=process).part(process)
        frame = devices = None
        if not result.part.traced:
            notes.append(
                "no trace: device ops come from a capture, or a run recorded with "
                "`xlaprof run --trace-steps A:B`"
            )
        else:
            held = result.table("devices")
            devices = None if held is None else _filtered(held, host, device)
            frame = result.device_ops()
            if view == "top_ops":
                from xlaprof.pipeline import top_ops_of

                frame = top_ops_of(result, host, device)
                host = device = None  # applied before summing
        page = _page(frame, host, device, offset, limit)
        return models.DeviceOpsOutput(
            path=str(result.part.sources[0].path if result.part.sources else path),
            process=result.part.name,
            table=view,
            notes=notes,
            devices=(records(devices) or []) if devices is not None else [],
            **page,
        )

    def compare_runs(
        self,
        before: Annotated[str, Field(description="The run before the change.")],
        after: Annotated[str, Field(description="The run after it.")],
    ) -> models.CompareOutput:
        """Compare two runs, as `xlaprof diff --json`: each figure (steps, compilations, step
        time, compile time, host syncs, ...) before and after with their ratio, and the
        findings that disappeared and appeared."""
        from xlaprof.pipeline import compare
        from xlaprof.report.json_out import comparison_document

        a, b = self.roots.resolve(before), self.roots.resolve(after)
        comparison = compare(self.request(a), self.request(b))
        return models.CompareOutput(**comparison_document(comparison), notes=comparison.notes)

    # The parameters are the tool's arguments (``xlaprof check``'s budgets, one each): the SDK
    # reads them as its input schema.
    def check_budgets(  # noqa: PLR0913
        self,
        paths: Annotated[list[str], Field(min_length=1, description="Run directories.")],
        max_recompilations: Annotated[
            int | None, Field(ge=0, description="Compilations allowed after warm-up.")
        ] = None,
        max_host_syncs_per_step: Annotated[
            float | None, Field(ge=0, description="Device-to-host reads per steady step.")
        ] = None,
        max_fallback_ops: Annotated[
            int | None, Field(ge=0, description="Distinct aten:: ops allowed on the CPU.")
        ] = None,
        allow_fallback: Annotated[
            list[str] | None, Field(description="Ops allowed to fall back (aten::median).")
        ] = None,
        max_graphs: Annotated[int | None, Field(ge=0, description="Distinct graphs.")] = None,
        forbid: Annotated[
            list[str] | None, Field(description="Finding kinds that must not appear.")
        ] = None,
        baseline: Annotated[
            str | None, Field(description="A run to compare step time with.")
        ] = None,
        max_step_time_ratio: Annotated[
            float | None, Field(ge=0, description="Median steady step / the baseline's.")
        ] = None,
        max_compile_seconds: Annotated[
            float | None, Field(ge=0, description="Total compile time, seconds.")
        ] = None,
        warmup_steps: Annotated[
            int | None,
            Field(ge=0, description="How many steps are warm-up: the first N the run holds."),
        ] = None,
        allow_unmeasured: Annotated[
            bool, Field(description="Skip a budget the run did not measure instead of failing.")
        ] = False,
        budget_file: Annotated[
            str | None,
            Field(description="A TOML file of budgets ([tool.xlaprof.check] or top level)."),
        ] = None,
    ) -> models.CheckOutput:
        """Check runs against budgets, as `xlaprof check --json` (the CI gate): each budget's
        value, limit and verdict (pass, fail, unmeasured, skipped), with the findings that
        explain a failure at the user's line. ok is false when any budget fails."""
        from xlaprof.budgets import Budgets
        from xlaprof.pipeline import check
        from xlaprof.report.ci import check_document

        runs = [self.roots.resolve(p) for p in paths]
        budgets = Budgets()
        if budget_file is not None:
            # resolved inside the roots first, then read with no link followed, regular only
            budgets = Budgets.from_file(self.roots.resolve(budget_file), follow=False)
        budgets = budgets.updated(
            max_recompilations=max_recompilations,
            max_host_syncs_per_step=max_host_syncs_per_step,
            max_fallback_ops=max_fallback_ops,
            allow_fallback=tuple(allow_fallback or ()),
            max_graphs=max_graphs,
            forbid=tuple(forbid or ()),
            baseline=None if baseline is None else self.roots.resolve(baseline),
            max_step_time_ratio=max_step_time_ratio,
            max_compile_seconds=max_compile_seconds,
            warmup_steps=warmup_steps,
            allow_unmeasured=allow_unmeasured or None,
        )
        if budgets.baseline is not None:
            self.roots.resolve(str(budgets.baseline))  # a file's baseline: inside too
        request = self.request(runs[0]).but(inputs=tuple(runs))
        result = check(request, budgets)
        return models.CheckOutput(**check_document(result))

    def explain_finding(
        self,
        kind: Annotated[
            str,
            Field(description="A finding kind, as in a finding's kind field (host_sync, ...)."),
        ],
    ) -> models.ExplainOutput:
        """What one finding kind means: what its analyzer reads, when it fires (its thresholds,
        as the analyzer has them now), and how to fix it, from the analyzer's own page and
        module."""
        from xlaprof.analyzers import analyzer_of
        from xlaprof.findings import Kind

        try:
            known = Kind(kind)
        except ValueError:
            kinds = ", ".join(k.value for k in Kind)
            raise InputNotRecognized(f"{kind!r}: no such finding kind (kinds: {kinds})") from None
        module = analyzer_of(known).module
        page_path = DOCS / f"{known.value}.md"
        page = page_path.read_text(encoding="utf-8") if page_path.is_file() else None
        constants = {
            name: value
            for name, value in vars(module).items()
            if name.isupper()
            and not name.startswith("_")
            and isinstance(value, int | float | str | tuple | frozenset)
        }
        return models.ExplainOutput(
            kind=known.value,
            module=module.__name__,
            summary=inspect.cleandoc(module.__doc__ or ""),
            page=page,
            page_path=str(page_path) if page is not None else None,
            constants=_jsonable(constants),
        )

    def run_script(
        self,
        script: Annotated[str, Field(description="A Python training script inside the roots.")],
        args: Annotated[
            list[str] | None, Field(description="Arguments passed to the script.")
        ] = None,
        max_steps: Annotated[
            int, Field(ge=1, description="Stop the script after this many steps.")
        ] = 10,
        trace_steps: Annotated[
            str | None,
            Field(description="Capture a device trace of steps A..B-1, as 'A:B'."),
        ] = None,
        timeout_s: Annotated[
            float, Field(gt=0, description="Stop the script after this many seconds.")
        ] = 300.0,
        out: Annotated[
            str | None,
            Field(
                description="Folder for the run, inside the roots (default: "
                "xlaprof-runs/mcp-<time> beside the script)."
            ),
        ] = None,
    ) -> models.RunOutput:
        """Run a script under `xlaprof run` (profiling every step) and analyze the run it
        writes. Only offered when the server was started with --allow-run; the steps and the
        time are capped by the server's --max-run-steps and --run-timeout."""
        source = self.roots.resolve(script)
        if not source.is_file():
            raise InputNotFound(f"{script}: not a file")
        folder = self._out_folder(out, source, "mcp")
        steps = min(max_steps, self.settings.max_run_steps)
        command = [sys.executable, "-m", "xlaprof", "run", "--quiet", "--max-steps", str(steps)]
        command += ["--out", str(folder)]
        if trace_steps:
            command += ["--trace-steps", trace_steps]
        command += ["--", sys.executable, str(source), *(args or [])]
        from xlaprof.pipeline import runs_in

        done = _run_bounded(command, source.parent, self._timeout(timeout_s))
        done.pop("stdout")
        analysis = None
        if folder.is_dir() and runs_in(folder):
            with self.held():
                analysis = self._overview(self.analysis(str(folder)), None, DEFAULT_FINDINGS)
        return models.RunOutput(**done, out=str(folder), analysis=analysis)

    def bench_fix(
        self,
        fix: Annotated[
            Literal["scan", "remat", "cache", "offload"],
            Field(
                description="The fix: scan (scan_layers), remat, cache (persistent "
                "compilation cache), offload (probe only)."
            ),
        ],
        target: Annotated[
            str,
            Field(
                description="path/to/module.py:factory inside the roots; factory() returns "
                "(model, batch)."
            ),
        ],
        steps: Annotated[int, Field(ge=1, description="Measured steps per side.")] = 5,
        timeout_s: Annotated[
            float, Field(gt=0, description="Stop the benchmark after this many seconds.")
        ] = 600.0,
    ) -> models.BenchOutput:
        """Measure a fix on the user's model, as `xlaprof bench FIX TARGET --json`: before and
        after in fresh processes, side by side, with a numerical check. Only offered when the
        server was started with --allow-run."""
        module, sep, factory = target.rpartition(":")
        if not sep or not module:
            raise InputNotRecognized(f"{target}: expected path/to/module.py:factory")
        source = self.roots.resolve(module)
        folder = self._out_folder(None, source, f"bench-{fix}")
        steps = min(steps, self.settings.max_run_steps)
        command = [sys.executable, "-m", "xlaprof", "bench", fix, f"{source}:{factory}"]
        command += ["--json", "--steps", str(steps), "--out", str(folder)]
        done = _run_bounded(command, source.parent, self._timeout(timeout_s))
        stdout = done.pop("stdout")
        result = None
        with contextlib.suppress(ValueError):
            result = json.loads(stdout) if stdout.strip() else None
        return models.BenchOutput(**done, out=str(folder), result=result)

    # -- helpers --------------------------------------------------------------------------------
    def _timeout(self, asked: float) -> float:
        return min(asked, self.settings.run_timeout_s)

    def _out_folder(self, out: str | None, beside: Path, prefix: str) -> Path:
        if out is None:
            name = time.strftime(f"{prefix}-%Y%m%d-%H%M%S")
            folder = beside.parent / "xlaprof-runs" / name
        else:
            given = Path(out).expanduser()
            holder = self.roots.holding(beside) or self.roots.paths[0]
            folder = (given if given.is_absolute() else holder / given).resolve()
        if self.roots.holding(folder) is None:
            raise OutsideRoots(f"{out}: outside the folders this server may write ({self.roots})")
        if folder.exists() and not folder.is_dir():
            raise InputNotRecognized(f"{folder}: exists and is not a folder")
        return folder


def _run_bounded(command: list[str], cwd: Path, timeout_s: float) -> dict[str, Any]:
    """Run ``command`` in its own process group, at most ``timeout_s`` seconds (then SIGTERM,
    and SIGKILL 10 s later); its exit code, the tail of its output, and its stdout."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as stdout, tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(
            command,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        timed_out = False
        try:
            code: int | None = child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            timed_out = True
            for sig, grace in ((signal.SIGTERM, 10), (signal.SIGKILL, None)):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(child.pid, sig)
                try:
                    child.wait(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
            code = None
        stdout.seek(0)
        stderr.seek(0)
        out_text = stdout.read().decode("utf-8", errors="replace")
        err_text = stderr.read().decode("utf-8", errors="replace")
    tail = (out_text + err_text)[-OUTPUT_TAIL_CHARS:]
    return {
        "command": command,
        "exit_code": code,
        "timed_out": timed_out,
        "seconds": round(time.monotonic() - started, 3),
        "output_tail": tail,
        "stdout": out_text,
    }


def _next(offset: int, shown: int, total: int) -> int | None:
    return offset + shown if offset + shown < total else None


def _filtered(frame: pd.DataFrame, host: str | None, device: str | None) -> pd.DataFrame:
    if host is not None and "host" in frame.columns:
        frame = frame[frame["host"] == host]
    if device is not None and "device" in frame.columns:
        frame = frame[frame["device"] == device]
    return frame


def _page(
    frame: pd.DataFrame | None, host: str | None, device: str | None, offset: int, limit: int
) -> dict[str, Any]:
    """One page of ``frame``'s rows, written as the ``--json`` document writes rows."""
    from xlaprof.report.json_out import records

    if frame is None:
        return {"total": 0, "offset": offset, "next_offset": None, "rows": []}
    frame = _filtered(frame, host, device)
    rows: list[dict[str, Any]] = records(frame.iloc[offset : offset + limit]) or []
    return {
        "total": len(frame),
        "offset": offset,
        "next_offset": _next(offset, len(rows), len(frame)),
        "rows": rows,
    }


def _step_tables(result: PartResult) -> dict[str, pd.DataFrame | None]:
    traced = result.part.traced
    return {  # every row, where the analysis cut a table for its document (rows_kept)
        "timeline": result.rows("timeline"),
        "device_steps": result.device_steps() if traced else None,
        "tracing": result.tracing_vs_device() if traced else None,
        "stragglers": result.rows("stragglers"),
        "host_steps": _host_steps(result),
        "host_skew": result.rows("host_skew"),
        **_host_tables(result),
    }


def _host_tables(result: PartResult) -> dict[str, pd.DataFrame | None]:
    """A capture without devices: its host tables; TORCH_TRACE logs: their compiles."""
    activity = result.host_activity
    return {
        "host_activity": None if activity is None else activity.steps,
        "host_hot": None if activity is None else activity.hot,
        "torch_compiles": result.torch_compiles,
    }


def _host_steps(result: PartResult) -> pd.DataFrame | None:
    """Several hosts' per-host rows: a pod keeps them on disk (its row store, read here when
    asked for)."""
    if result.host_steps is None and "host_steps" in result.store:
        return result.host_steps_frame()
    return result.rows("host_steps")


def _table_sizes(result: PartResult) -> dict[str, int]:
    """Each table's row count; a pod's per-step tables are counted, not read."""
    counted = {
        "timeline": result.rows("timeline"),
        "stragglers": result.rows("stragglers"),
        "host_skew": result.rows("host_skew"),
    }
    counted.update(_host_tables(result))
    sizes = {name: len(frame) for name, frame in counted.items() if frame is not None}
    if result.part.traced:
        sizes["device_steps"] = result.count("device_steps") or 0
        sizes["tracing"] = result.count("tracing") or 0
    held = result.rows("host_steps")
    if held is not None:
        sizes["host_steps"] = len(held)
    elif "host_steps" in result.store:
        sizes["host_steps"] = result.store.count("host_steps")
    if result.part.traced:
        sizes["ops"] = result.count("device_ops") or 0
        sizes["top_ops"] = result.count("top_ops") or 0
    return sizes


def _absent(table: str) -> str:
    why = {
        "timeline": "per-step rows come from a run directory or a capture with step markers",
        "device_steps": "device steps come from a capture or a run's trace window",
        "tracing": "tracing rows come from a capture or a run's trace window",
        "host_activity": "host rows come from a capture without device planes, with steps",
        "host_hot": "host rows come from a capture without device planes, with steps",
        "torch_compiles": "compile rows come from TORCH_TRACE logs",
    }
    return f"no {table} table here: " + why.get(table, "it needs a capture of several hosts")


def _trace_overview(trace: dict[str, Any]) -> models.TraceOverview:
    big = {"device_steps", "device_ops", "tracing", "files", "devices", "top_ops"}
    rest = {k: v for k, v in trace.items() if k not in big}
    return models.TraceOverview(
        **rest,
        files_total=len(trace["files"]),
        devices=(trace["devices"] or [])[:OVERVIEW_DEVICES],
        devices_total=len(trace["devices"] or []),
        top_ops=(trace["top_ops"] or [])[:OVERVIEW_TOP_OPS],
    )


def _source(source: dict[str, Any]) -> models.SourceOut:
    return models.SourceOut(
        **{**source, "warnings": source["warnings"][:OVERVIEW_WARNINGS]},
        warnings_total=len(source["warnings"]),
    )


def _jsonable(values: dict[str, Any]) -> dict[str, Any]:
    return {
        k: sorted(v) if isinstance(v, frozenset) else list(v) if isinstance(v, tuple) else v
        for k, v in values.items()
    }
