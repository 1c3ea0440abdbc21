"""The finished result is closed: no live input is reachable from it.

``pipeline.analyze`` returns numbers, typed tables and findings; the part it was made from
(``Part``), the run directory's reader (``Run``), the analyzer input (``AnalysisInput``), the
trace (``Trace``) and its event sources stay behind. A pod's rows left on disk are named by the
result's row store (files and row counts), which reads them on its own. Walked here on a real
run, a capture, a log and a pod: every attribute, item and table cell of each result.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from builders import analysis_input

from xlaprof.model.device import DeviceSummary
from xlaprof.model.input import AnalysisInput
from xlaprof.model.parts import Part
from xlaprof.model.pod import CachedEvents, PodLoad
from xlaprof.model.request import AnalysisRequest, PodSettings
from xlaprof.model.trace import HeldEvents, Trace
from xlaprof.pipeline import analyze
from xlaprof.rundir.reader import Run

LIVE = (Part, Run, AnalysisInput, Trace, HeldEvents, CachedEvents, DeviceSummary, PodLoad)


def _live_in(value: Any, path: str, seen: set[int]) -> list[str]:
    """Where under ``value`` (named ``path``) a live input or a callable is reachable."""
    import pandas as pd

    if id(value) in seen or value is None or isinstance(value, str | int | float | bool):
        return []
    seen.add(id(value))
    if isinstance(value, LIVE):
        return [f"{path}: {type(value).__name__}"]
    if callable(value) and not isinstance(value, type):
        return [f"{path}: a callable ({value!r:.80})"]
    if isinstance(value, pd.DataFrame):
        found = []
        for column in value.columns:
            if value[column].dtype == object:
                for row, cell in enumerate(value[column].tolist()):
                    found += _live_in(cell, f"{path}[{column!r}][{row}]", seen)
        return found
    if isinstance(value, dict):
        found = []
        for key, item in value.items():
            found += _live_in(key, f"{path} key", seen)
            found += _live_in(item, f"{path}[{key!r}]", seen)
        return found
    if isinstance(value, list | tuple | set | frozenset):
        return [f for i, item in enumerate(value) for f in _live_in(item, f"{path}[{i}]", seen)]
    if dataclasses.is_dataclass(value) or hasattr(value, "__dict__"):
        attributes = dict(vars(value)) if hasattr(value, "__dict__") else {}
        if dataclasses.is_dataclass(value):
            attributes.update({f.name: getattr(value, f.name) for f in dataclasses.fields(value)})
        return [
            f for name, item in attributes.items() for f in _live_in(item, f"{path}.{name}", seen)
        ]
    return []


@pytest.mark.parametrize("kind", ["run", "capture", "log", "pod"])
def test_no_live_input_is_reachable_from_a_result(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # GIVEN a real input of each kind, analyzed as every command analyzes it
    path, env = analysis_input(kind, tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = analyze(AnalysisRequest((path,), pod=PodSettings.of(os.environ)))
    # WHEN every attribute, item and object cell of the result is walked
    found = _live_in(result, "result", set())
    # THEN none is a part, a run's reader, an analyzer input, a trace or an event source
    assert not found, "\n".join(found[:20])
    part = result.parts[0]
    if kind == "pod":
        # AND a pod's per-step rows left on disk are named by its row store, files and counts,
        # and read from there: the rows its result counts
        assert {"device_steps", "host_steps"} <= set(part.store.names())
        for name in ("device_steps", "host_steps"):
            files = [host.path for host in part.store.tables[name]]
            assert files and all(Path(f).is_file() for f in files if f is not None)
        assert len(part.device_steps()) == part.count("device_steps") > 0
        assert len(part.host_steps_frame()) == part.store.count("host_steps") > 0
    else:
        assert not part.store.tables
