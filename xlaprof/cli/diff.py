"""``xlaprof diff RUN_A RUN_B``: two runs side by side, and which findings came and went."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from xlaprof.cli.common import analysis_options


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@analysis_options
def diff(before: Path, after: Path, as_json: bool, **settings: Any) -> None:
    """Compare two run directories: figures as ratios, findings that appeared or disappeared.

    Each side is one process run: the one --process names (where each side has it), else the
    first of each folder's latest run.
    """
    from xlaprof.cli.common import emit, request_from, say
    from xlaprof.pipeline import compare

    request = request_from((before,), settings)
    comparison = compare(request, request.but(inputs=(after,)))
    for note in comparison.notes:
        say(note)
    for side in comparison.sides or ():
        for part in side.parts:
            from xlaprof.cli.common import trace_notes

            trace_notes(part.part)
    emit(comparison, "json" if as_json else None)
