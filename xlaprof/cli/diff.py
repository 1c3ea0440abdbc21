"""``xlaprof diff RUN_A RUN_B``: two runs side by side, and which findings came and went."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.argument("before", type=click.Path(path_type=Path))
@click.argument("after", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def diff(before: Path, after: Path, as_json: bool) -> None:
    """Compare two run directories: figures as ratios, findings that appeared or disappeared."""
    from xlaprof.cli.common import emit, say
    from xlaprof.pipeline import compare_runs

    comparison, notes = compare_runs(before, after)
    for note in notes:
        say(note)
    emit(comparison, "json" if as_json else None)
