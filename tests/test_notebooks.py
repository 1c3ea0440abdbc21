"""Every notebook in notebooks/ runs top to bottom on sample_traces/ (no TPU, no runtime)."""

from __future__ import annotations

from pathlib import Path

import nbclient
import nbformat
import pytest
from helpers import REPO

NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def test_there_are_four_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS] == [
        "quickstart.ipynb",
        "recompilation.ipynb",
        "scan_fix.ipynb",
        "tracing_bound.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_executes(path: Path) -> None:
    book = nbformat.read(path, as_version=4)
    assert all(not cell.get("outputs") for cell in book.cells if cell.cell_type == "code")
    client = nbclient.NotebookClient(
        book, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    )
    client.execute()  # raises CellExecutionError on any failing cell
    outputs = [o for cell in book.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    figures = [o for o in outputs if "application/vnd.plotly.v1+json" in o.get("data", {})]
    assert figures, "each notebook shows at least one figure"
