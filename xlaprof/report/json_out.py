"""The ``--json`` document: ``xlaprof.analysis/1`` (see docs/json-format.md).

The keys listed in the contract are stable; more keys may be added. Non-finite numbers become
``null`` so the output is strict JSON.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TextIO

from xlaprof.findings import merged_coverage
from xlaprof.model.document_id import DOCUMENT_VERSION, SCHEMA
from xlaprof.model.result import AnalysisResult, Counts, KeptRows, PartResult, RunComparison
from xlaprof.report.base import RenderOptions
from xlaprof.tables.document import (
    MAX_DEVICE_OPS,
    MAX_LINE_ROWS,
    MAX_STEP_ROWS,
    StrictRows,
    bottleneck_json,
    devices_table,
    host_json,
    lines_json,
    records,
    strict_document,
    strict_json,
    trace_json,
)

__all__ = [
    "MAX_DEVICE_OPS",
    "MAX_LINE_ROWS",
    "MAX_STEP_ROWS",
    "SCHEMA",
    "analysis_json",
    "bottleneck_json",
    "comparison_document",
    "devices_table",
    "lines_json",
    "records",
    "result_document",
    "results_document",
    "strict_document",
    "strict_json",
    "trace_json",
]

if TYPE_CHECKING:
    pass


def analysis_document(result: PartResult, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole ``--json`` document of one part as a dict."""
    sources, counts = result.part.sources, result.counts
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "document_version": DOCUMENT_VERSION,
        "sources": [
            {
                "path": s.path,
                "kinds": s.kinds,
                "reports": s.reports,
                "debug_events": s.debug_events,
                "warnings": [asdict(w) for w in s.warnings],
            }
            for s in sources
        ],
        "reports": result.reports_json,
        "debug_events": result.events_json,
        "summary": {
            "compiles": None if counts is None else counts.compiles,
            "executions": None if counts is None else counts.executions,
            "device_to_host_transfers": None if counts is None else counts.device_to_host_transfers,
            "aten_fallbacks": {} if counts is None else counts.aten_fallbacks,
            "steps": None if counts is None else counts.steps,
        },
        "findings": [f.to_json() for f in result.findings],
    }
    if extra:
        document.update(extra)
    return strict_document(document)


def result_document(result: PartResult) -> dict[str, Any]:
    """One part's document: the contract plus ``timeline``, ``host_skew``, ``trace`` and
    ``view`` (what the renderers show beyond them: a saved document re-renders the same)."""
    if result.saved is not None:
        return result.saved
    part = result.part
    extra: dict[str, Any] = {"view": result.view_json()}
    if part.run_summary is not None:
        extra["run"] = part.run_summary.to_json()
    if result.trace_json is not None:
        extra["trace"] = result.trace_json
    extra["analyzers"] = [entry.to_json() for entry in result.analyzers]
    if result.story is not None:
        extra["story"] = result.story.to_json()
    if result.timeline is not None:
        extra["timeline"] = records(result.timeline)
    kept = result.rows_kept
    if result.host_skew is not None:
        extra["host_skew"] = records(result.host_skew.head(MAX_STEP_ROWS))
        extra["host_skew_total"] = _total(result.host_skew, kept.get("host_skew"))
    if result.stragglers is not None:
        # per step and device; the per-host rows (hosts x steps, the heat map's data) stay out
        # of the document so its size does not grow with the pod: Analysis.host_steps() has them.
        # The rows the result kept (rows_kept says how they were chosen), at most MAX_STEP_ROWS:
        # Analysis.stragglers() has every row.
        extra["stragglers"] = records(result.stragglers.head(MAX_STEP_ROWS))
        extra["stragglers_total"] = _total(result.stragglers, kept.get("stragglers"))
    extra.update(_kept_json(result))
    extra.update(host_json(result.host_activity, result.torch_compiles))
    return analysis_document(result, extra)


def _kept_json(result: PartResult) -> dict[str, Any]:
    """``rows_kept`` (the per-step tables cut) and ``summaries`` (the console's figures of
    stragglers and host skew over every row), each where there is one."""
    extra: dict[str, Any] = {}
    if result.rows_kept:
        extra["rows_kept"] = {name: told.to_json() for name, told in result.rows_kept.items()}
    if result.summaries:
        extra["summaries"] = {name: dict(figures) for name, figures in result.summaries.items()}
    return extra


def _total(table: Any, kept: KeptRows | None) -> int:
    """How many rows a table had in all: its own, or, cut, what ``rows_kept`` says."""
    return len(table) if kept is None else kept.total


def results_document(results: list[PartResult], totals: Counts | None = None) -> dict[str, Any]:
    """One document for one or more analysis parts (processes of a run).

    With one part this is exactly ``result_document``. With several, the contract's lists are
    concatenated (findings tagged with ``evidence.process``), the summary is the parts' counts
    summed (``totals``, the pipeline's ``AnalysisResult.totals``), and ``processes`` holds each
    part's own document.
    """
    documents = [result_document(result) for result in results]
    if len(documents) == 1:
        return documents[0]
    merged: dict[str, Any] = {
        "schema": SCHEMA,
        "document_version": DOCUMENT_VERSION,
        "sources": [s for d in documents for s in d["sources"]],
        "reports": [r for d in documents for r in d["reports"]],
        "debug_events": [e for d in documents for e in d["debug_events"]],
        "summary": _summary(totals, documents),
        "findings": [],
        "analyzers": [e.to_json() for e in merged_coverage([r.analyzers for r in results])],
        "processes": documents,
    }
    for result, document in zip(results, documents, strict=True):
        for finding in document["findings"]:
            merged["findings"].append(
                {**finding, "evidence": {**finding["evidence"], "process": result.part.name}}
            )
    return merged


def _summary(totals: Counts | None, documents: list[dict[str, Any]]) -> dict[str, Any]:
    """The merged document's ``summary``: the pipeline's summed counts (parts given without
    them: their documents' summaries, summed by ``Counts.total``)."""
    if totals is None:
        totals = Counts.total([Counts.from_summary(d["summary"]) for d in documents])
    return strict_document(
        {
            "compiles": totals.compiles,
            "executions": totals.executions,
            "device_to_host_transfers": totals.device_to_host_transfers,
            "aten_fallbacks": totals.aten_fallbacks,
            "steps": totals.steps,
        }
    )


# One line of JSON, by the json module's C encoder (which ``indent`` turns off): a table's row,
# a list of numbers, a value.
_LINE = json.JSONEncoder(allow_nan=False, separators=(", ", ": "))
_INDENT = "  "
_NESTED = frozenset((dict, list, tuple, StrictRows))


def dumps(document: dict[str, Any]) -> str:
    """``document`` as indented JSON text, each of its tables' rows on one line.

    Objects are opened one key a line, as ``json.dumps(indent=2)`` does; a list's items go one
    to a line, and an item that is a flat object (a row: no object or list in it) or anything
    but an object is written on that line whole. The text parses to the same document as
    ``json.dumps(document, indent=2)``'s: on an 80 MB capture's 4 MB document that one's pure
    Python encoder took 0.2 s, five times this.
    """
    parts: list[str] = []
    _write(document, 0, parts)
    return "".join(parts)


def _write(value: Any, depth: int, parts: list[str]) -> None:
    """Append ``value``'s text at ``depth`` levels of indentation to ``parts``."""
    if isinstance(value, dict) and value and all(type(key) is str for key in value):
        inner = "\n" + _INDENT * (depth + 1)
        separator = "{"
        for key, item in value.items():
            parts.append(f"{separator}{inner}{_LINE.encode(key)}: ")
            _write(item, depth + 1, parts)
            separator = ","
        parts.append("\n" + _INDENT * depth + "}")
    elif isinstance(value, list | tuple) and not _NESTED.isdisjoint(map(type, value)):
        inner = "\n" + _INDENT * (depth + 1)
        separator = "["
        for item in value:
            parts.append(separator + inner)
            if isinstance(item, dict) and not _is_row(item):
                _write(item, depth + 1, parts)
            else:
                parts.append(_LINE.encode(item))
            separator = ","
        parts.append("\n" + _INDENT * depth + "]")
    else:
        parts.append(_LINE.encode(value))


def _is_row(item: dict[Any, Any]) -> bool:
    """Whether ``item`` is a flat object: no object or list among its values (by exact type: a
    subclass's value is written on the row's line, which only its layout tells)."""
    return _NESTED.isdisjoint(map(type, item.values()))


def analysis_json(result: AnalysisResult, self_check: bool = False) -> dict[str, Any]:
    """The whole ``--json`` document of ``result``: its parts' (``results_document``) and,
    under ``view``, every process found and the notes on which were read; ``self_check``:
    checked against its schema first (``_self_check``)."""
    document = dict(results_document(result.parts, result.totals))
    view = dict(document.get("view") or {})
    view.update({"processes": result.processes, "notes": result.measured_notes()})
    read_from = next((p.read_from for p in result.parts if p.read_from is not None), None)
    if read_from is not None:
        view["read_from"] = read_from
    document["view"] = view
    if self_check:
        _self_check(document)
    return document


def _self_check(document: dict[str, Any]) -> None:
    """Raise unless ``document`` passes the schema it is read back by: one it refuses is
    xlaprof's bug (the test suite's runs check every document they write)."""
    from xlaprof.errors import SavedDocumentInvalid
    from xlaprof.model.document import check_document

    try:
        check_document(document, "the --json document written")
    except SavedDocumentInvalid as error:
        raise RuntimeError(f"xlaprof wrote a document its own schema refuses: {error}") from None


def write_analysis(result: AnalysisResult, out: TextIO, options: RenderOptions) -> None:
    """The ``--json`` document (``xlaprof.analysis/1``)."""
    out.write(dumps(analysis_json(result, options.self_check)) + "\n")


DIFF_SCHEMA = "xlaprof.diff/1"


def write_comparison(comparison: RunComparison, out: TextIO, options: RenderOptions) -> None:
    """``xlaprof diff --json`` (``xlaprof.diff/1``): each figure, and the findings that went
    and came."""
    out.write(dumps(comparison_document(comparison)) + "\n")


def comparison_document(comparison: RunComparison) -> dict[str, Any]:
    """The ``xlaprof.diff/1`` document as a dict."""
    document = {
        "schema": DIFF_SCHEMA,
        "before": comparison.before,
        "after": comparison.after,
        "comparison": records(comparison.table),
        "findings_disappeared": comparison.gone,
        "findings_appeared": comparison.came,
    }
    return strict_document(document)
