"""What ``xlaprof check`` judges, measured once from the analyzer input (``CheckFigures``).

The budgets read these numbers from the result, never the input itself, so a saved result
(``xlaprof check saved.json``) is judged exactly as the run it was made from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xlaprof.model.input import COMPILE_METRICS
from xlaprof.model.result import CheckFigures, StepCount
from xlaprof.parse.metrics_report import HOST_SYNC_OP

if TYPE_CHECKING:
    from xlaprof.model.input import AnalysisInput
    from xlaprof.rundir.reader import Run


def check_figures(data: AnalysisInput, run: Run | None) -> CheckFigures:
    """The budgets' figures of ``data`` (and of ``run``, its run directory, where there is one)."""
    steps = [
        StepCount(
            step=s.step,
            compiles=s.compiles,
            compile_s=s.compile_s,
            reads=s.transfers_from_device,
            scalar_reads=s.aten.get(HOST_SYNC_OP, 0),
            fallback_calls=sum(v for k, v in s.aten.items() if k != HOST_SYNC_OP),
        )
        for s in data.steps
    ]
    compilations = data.debug.compilations()
    hashes = [e.graph_hash for e in compilations]
    report_compile_s = None
    if data.reports:
        # torch_xla omits a metric that never had a sample: then no compilation happened.
        report_compile_s = data.metric_total(*COMPILE_METRICS) or 0.0
    return CheckFigures(
        steps=steps,
        has_reports=bool(data.reports),
        report_compile_s=report_compile_s,
        logged_compilations=len(compilations),
        graph_hashes=len(set(hashes)),
        all_hashed=all(hashes),
        run_path=None if run is None else str(run.path),
        run_status=None if run is None else run.info.status,
    )
