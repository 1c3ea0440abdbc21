"""Renderers: each presents one kind of result, computes nothing new, and is picked by name or
by the extension of the file it writes.

The contract: a renderer's ``write(result, out, options)`` writes one result to a text stream.
Three results exist (``xlaprof.model.result``): an ``AnalysisResult`` (``xlaprof analyze`` and
``report``), a ``CheckResult`` (``xlaprof check``) and a ``RunComparison`` (``xlaprof diff``).
``RENDERERS`` lists every renderer once; ``renderer_for`` picks one for a result from a name
(``--json`` is ``json``) or an output path's extension (``-o report.html``), else the result's
first (its terminal form); ``render`` returns the text. A value that was not measured shows as
"—" in every text form and ``null`` in JSON.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from xlaprof.budgets import CheckResult
from xlaprof.errors import OutputError
from xlaprof.model.result import AnalysisResult, RunComparison
from xlaprof.report import ci, json_out
from xlaprof.report.base import Renderer, RenderOptions

Result = AnalysisResult | CheckResult | RunComparison


def _when_called(module: str, name: str) -> Callable[[Any, TextIO, RenderOptions], None]:
    """``xlaprof.report.<module>.<name>``, imported when first called: the console and HTML
    renderers import rich and the figures (~0.1-0.4 s), which a ``--json`` run never uses."""

    def write(result: Any, out: TextIO, options: RenderOptions) -> None:
        import importlib

        getattr(importlib.import_module(f"xlaprof.report.{module}"), name)(result, out, options)

    write.__name__ = write.__qualname__ = name
    return write


RENDERERS: tuple[Renderer, ...] = (
    Renderer("console", AnalysisResult, _when_called("console", "write_analysis")),
    Renderer("json", AnalysisResult, json_out.write_analysis, (".json",)),
    Renderer("html", AnalysisResult, _when_called("html", "write_analysis"), (".html", ".htm")),
    Renderer("text", CheckResult, ci.write_text, (".txt",)),
    Renderer("json", CheckResult, ci.write_json, (".json",)),
    Renderer("junit", CheckResult, ci.write_junit, (".xml",)),
    Renderer("github", CheckResult, ci.write_github),
    Renderer("console", RunComparison, _when_called("console", "write_comparison")),
    Renderer("json", RunComparison, json_out.write_comparison, (".json",)),
)


def renderer_for(result: Result, name: str | None = None, path: Path | None = None) -> Renderer:
    """The renderer named ``name``, else the one for ``path``'s extension, else the first
    listed for this kind of result. ``OutputError`` when none fits."""
    mine = [r for r in RENDERERS if isinstance(result, r.accepts)]
    if name is not None:
        chosen = [r for r in mine if r.name == name]
    elif path is not None:
        chosen = [r for r in mine if path.suffix.lower() in r.extensions]
    else:
        chosen = mine
    if not chosen:
        forms = ", ".join(f"{r.name} ({' '.join(r.extensions) or 'no file'})" for r in mine)
        if name is not None:
            what = f"format {name!r}"
        elif path is not None:
            what = f"{path}: extension {path.suffix!r}"
        else:
            what = type(result).__name__
        raise OutputError(f"{what}: not an output of this command (it writes {forms})")
    return chosen[0]


def render(
    result: Result,
    name: str | None = None,
    path: Path | None = None,
    options: RenderOptions | None = None,
) -> str:
    """The text ``renderer_for(result, name, path)`` writes."""
    buffer = io.StringIO()
    renderer_for(result, name, path).write(result, buffer, options or RenderOptions())
    return buffer.getvalue()


__all__ = ["RENDERERS", "RenderOptions", "Renderer", "Result", "render", "renderer_for"]
