"""The XSpace frame's ``args`` column decoded on demand (``xlaprof.parse.xplane.args``).

Every expected dict is the reference decoder's (``xplane_reference.py``: upb parses the file into
full messages, a Python loop builds each event's dict), on real captures: the lazy column must
read as that list of dicts through every way a user reads a column, and through the pandas
operations the load and the analysis use (masks, ``take``, ``copy``, ``concat`` of several
hosts, pickling to and from worker processes), while the analysis itself makes no dict.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from helpers import (
    FUSED_ATTN,
    JAX_CPU,
    MI300,
    SAMPLES,
    TPU,
    sample_capture,
    shared_trace,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xplane_reference import reference_frame

import xlaprof
from xlaprof import pipeline
from xlaprof.model.request import AnalysisRequest
from xlaprof.parse.chrome_trace import chrome_trace_frame
from xlaprof.parse.xplane import xspace_frame
from xlaprof.parse.xplane.args import ArgsArray, ArgsDtype, EventStats, stat_values
from xlaprof.tables.device.events import STATS_READ

CAPTURES = {
    "tpu": lambda: shared_trace(TPU),
    "mi300": lambda: shared_trace(MI300),
    "fused_attn": lambda: shared_trace(FUSED_ATTN),
    "jax_cpu": lambda: SAMPLES / "jax_cpu" / JAX_CPU,
    "torch_xla_cpu": lambda: sample_capture("host_sync_item"),
}


def same_value(a: object, b: object) -> bool:
    """Equal and of one type (``==`` alone takes 1 for 1.0, and a NaN for unequal to itself)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and a != a:
        return b != b
    return a == b


def same_dicts(got: list[Any], expected: list[Any]) -> bool:
    """Row by row: None where None, else the same keys in the same order, same values and
    types."""
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        if (mine is None) != (theirs is None):
            return False
        if theirs is not None and (
            list(mine) != list(theirs) or not all(same_value(mine[k], theirs[k]) for k in theirs)
        ):
            return False
    return True


@pytest.fixture(scope="module")
def loaded() -> dict[str, tuple[Path, pd.DataFrame, list[Any]]]:
    """Per capture: its path, its frame and the reference decoder's dicts."""
    out = {}
    for name, where in CAPTURES.items():
        path = where()
        out[name] = (path, xspace_frame(path), reference_frame(path)["args"].tolist())
    return out


@pytest.mark.parametrize("name", list(CAPTURES))
def test_one_stat_a_row_reads_as_the_dicts_get(name: str, loaded: dict[str, Any]) -> None:
    path, _, expected = loaded[name]
    frame = xspace_frame(path)  # a fresh one: nothing of it read yet
    column = frame["args"]
    assert isinstance(column.dtype, ArgsDtype)
    assert column.isna().tolist() == [d is None for d in expected]
    keys = sorted({key for d in expected if d for key in d})
    assert keys  # every capture here has events with stats
    for key in [*keys, "no such stat"]:
        got = stat_values(column, key)
        assert got.dtype == object and len(got) == len(expected)
        want = [d.get(key) if d else None for d in expected]
        assert all(same_value(a, b) for a, b in zip(got.tolist(), want, strict=True)), key
    assert column.array.dicts_made() == 0  # read without a dict


@pytest.mark.parametrize("name", list(CAPTURES))
def test_rows_read_as_the_reference_dicts(name: str, loaded: dict[str, Any]) -> None:
    path, _, expected = loaded[name]
    column = xspace_frame(path)["args"]
    rows = np.random.default_rng(0).choice(len(expected), size=min(50, len(expected)))
    singles = [column.iloc[int(row)] for row in rows]
    assert same_dicts(singles, [expected[row] for row in rows])
    made = column.array.dicts_made()
    assert 0 < made <= len(set(rows.tolist()))  # only the rows read were made
    assert same_dicts(column.tolist(), expected)
    assert column.array.dicts_made() == sum(d is not None for d in expected)
    assert column.iloc[int(rows[0])] is singles[0]  # one dict a row, made once


def test_every_way_of_reading_a_column(loaded: dict[str, Any]) -> None:
    _, frame, expected = loaded["tpu"]
    column = frame["args"]
    assert same_dicts(list(column), expected)
    assert same_dicts([a for a in column], expected)
    assert same_dicts(column.to_numpy(dtype=object).tolist(), expected)
    assert same_dicts(np.asarray(column).tolist(), expected)
    assert same_dicts(column.loc[column.index[:5]].tolist(), expected[:5])
    assert same_dicts([column.loc[label] for label in column.index[-3:]], expected[-3:])

    def size(d: Any) -> int:
        return len(d) if d else -1

    # As an object column of the same dicts maps them (pandas' own inference of the results).
    objects = pd.Series(expected, index=column.index, name=column.name, dtype=object)
    for how in (
        lambda s: s.map(size),
        lambda s: s.apply(size),
        lambda s: s.map(size, na_action="ignore"),
        lambda s: s.map(lambda d: d),
        lambda s: s.map(lambda d: d and next(iter(d))),
    ):
        pd.testing.assert_series_equal(how(column), how(objects), check_exact=True)


def test_selections_copies_and_frames(loaded: dict[str, Any]) -> None:
    _, frame, expected = loaded["tpu"]
    mask = (frame["plane_kind"] == "device").to_numpy()
    assert 0 < mask.sum() < len(frame)
    chosen = frame[mask]
    assert isinstance(chosen["args"].dtype, ArgsDtype)
    kept = [d for d, m in zip(expected, mask, strict=True) if m]
    assert same_dicts(chosen["args"].tolist(), kept)
    assert same_dicts(chosen.copy()["args"].tolist(), kept)
    taken = frame["args"].array.take([3, -1, 0], allow_fill=True)
    assert same_dicts(taken.tolist(), [expected[3], None, expected[0]])
    assert same_dicts(frame["args"].array.take([-1]).tolist(), [expected[-1]])
    empty = frame.iloc[:0]
    assert isinstance(empty["args"].dtype, ArgsDtype) and empty["args"].tolist() == []
    assigned = frame.assign(extra=1)
    assert same_dicts(assigned["args"].tolist(), expected)
    reversed_rows = frame.iloc[::-1]
    assert same_dicts(reversed_rows["args"].tolist(), expected[::-1])
    stepped = frame.sort_values("duration_ns", kind="stable")
    order = np.argsort(frame["duration_ns"].to_numpy(), kind="stable")
    assert same_dicts(stepped["args"].tolist(), [expected[i] for i in order])


def test_frames_compare_as_their_dicts(loaded: dict[str, Any]) -> None:
    path, frame, expected = loaded["fused_attn"]
    again = xspace_frame(path)
    pd.testing.assert_frame_equal(frame, again, check_exact=True)
    changed = again.copy()
    row = next(i for i, d in enumerate(expected) if d is not None)
    changed.at[row, "args"] = {"other": 1}
    assert changed["args"].iloc[row] == {"other": 1}
    assert same_dicts(again["args"].tolist(), expected)  # the copy's change stays its own
    with pytest.raises(AssertionError):
        pd.testing.assert_frame_equal(frame, changed, check_exact=True)
    # ``==`` row by row, as pandas compares object columns of the same dicts (None: False).
    objects = pd.Series(expected, dtype=object)
    equal = frame["args"].array == again["args"].array
    assert equal.tolist() == (objects == objects).tolist()
    assert equal.sum() == sum(d is not None for d in expected)
    assert not (frame["args"].array == changed["args"].array)[row]
    assert (frame["args"] == changed["args"]).sum() == equal.sum() - 1


def test_a_pickle_holds_the_stats_not_the_dicts(loaded: dict[str, Any]) -> None:
    path, _, expected = loaded["jax_cpu"]
    frame = xspace_frame(path)
    frame["args"].tolist()  # every dict made
    back = pickle.loads(pickle.dumps(frame))
    assert isinstance(back["args"].dtype, ArgsDtype)
    assert back["args"].array.dicts_made() == 0
    assert same_dicts(back["args"].tolist(), expected)
    fresh = xspace_frame(path)["args"]
    assert len(pickle.dumps(frame["args"])) == len(pickle.dumps(fresh))


def test_several_hosts_concatenate(loaded: dict[str, Any]) -> None:
    _, tpu, tpu_dicts = loaded["tpu"]
    _, gpu, gpu_dicts = loaded["fused_attn"]
    both = pd.concat([tpu, gpu], ignore_index=True)
    assert isinstance(both["args"].dtype, ArgsDtype)
    assert same_dicts(both["args"].tolist(), tpu_dicts + gpu_dicts)
    got = stat_values(both["args"], "hlo_op").tolist()
    assert got == [d.get("hlo_op") if d else None for d in tpu_dicts + gpu_dicts]
    # A concat of concats, of selections, in another order.
    tail = gpu.iloc[5:9]
    again = pd.concat([both.iloc[-3:], tail, tpu.iloc[:2]], ignore_index=True)
    want = (tpu_dicts + gpu_dicts)[-3:] + gpu_dicts[5:9] + tpu_dicts[:2]
    assert same_dicts(again["args"].tolist(), want)
    assert same_dicts(pickle.loads(pickle.dumps(again))["args"].tolist(), want)


def test_with_a_chrome_frame_it_becomes_an_object_column(loaded: dict[str, Any]) -> None:
    _, tpu, tpu_dicts = loaded["tpu"]
    (kineto,) = sorted((SAMPLES / "host_capture").glob("*.trace.json.gz"))
    chrome = chrome_trace_frame(kineto)
    chrome_dicts = chrome["args"].tolist()
    both = pd.concat([tpu, chrome], ignore_index=True)
    assert both["args"].dtype == object
    assert same_dicts(both["args"].tolist(), tpu_dicts + chrome_dicts)
    assert stat_values(both["args"], "cat").tolist() == [
        d.get("cat") if isinstance(d, dict) else None for d in tpu_dicts + chrome_dicts
    ]


def test_values_set_are_held(loaded: dict[str, Any]) -> None:
    _, frame, expected = loaded["tpu"]
    column = frame["args"].array.copy()
    column[0] = {"set": 1}
    column[np.array([1, 2])] = None
    assert column[0] == {"set": 1} and column[1] is None and column[2] is None
    assert same_dicts(column[3:].tolist(), expected[3:])
    assert stat_values(column, "set").tolist()[:2] == [1, None]
    made = ArgsArray._from_sequence([{"a": 1}, None])
    assert made.tolist() == [{"a": 1}, None] and made.isna().tolist() == [False, True]
    assert same_dicts(frame["args"].tolist(), expected)  # the frame's own column unchanged


def test_the_analysis_makes_no_dict(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loading a run and analyzing it reads stats, never a whole dict; reading the column does
    (the count can see it)."""
    made: list[int] = []
    make = EventStats._make

    def counting(self: EventStats, events: np.ndarray) -> None:
        made.append(len(events))
        make(self, events)

    monkeypatch.setattr(EventStats, "_make", counting)
    run = SAMPLES / "runs" / "host_sync_item"
    assert xlaprof.analyze(run)
    trace = xlaprof.load_trace(run)
    summary = trace.summary()
    for table in (summary.steps, summary.ops, summary.lines, summary.bottleneck):
        assert table is not None
    trace.step_times()
    assert made == []
    trace.events["args"].tolist()
    assert sum(made) > 0


def test_a_session_of_two_hosts_loads_in_workers(loaded: dict[str, Any], tmp_path: Path) -> None:
    """Hosts load in worker processes (their columns pickled back) and are concatenated."""
    session = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    for host, name in (("a", "fused_attn"), ("b", "mi300")):
        (session / f"{host}.xplane.pb").symlink_to(loaded[name][0])
    trace = xlaprof.load_trace(tmp_path, lazy=False, workers=2)
    assert len(trace.files) == 2
    column = trace.events["args"]
    assert isinstance(column.dtype, ArgsDtype)
    assert column.array.dicts_made() == 0
    assert same_dicts(column.tolist(), loaded["fused_attn"][2] + loaded["mi300"][2])


def restricted(dicts: list[Any], kept: frozenset[str]) -> list[Any]:
    """Each dict with only the keys ``kept`` (in its own order), None where none is left."""
    out = []
    for d in dicts:
        mine = {k: v for k, v in d.items() if k in kept} if d else {}
        out.append(mine or None)
    return out


def check_kept(
    path: Path, whole: pd.DataFrame, expected: list[Any], kept: frozenset[str], dicts: int
) -> None:
    """``xspace_frame(path, args=kept)`` against the reference dicts restricted to ``kept``
    (``dicts`` rows of them read as dicts, at random) and the whole frame's other columns; a
    stat not kept cannot be read as if absent."""
    frame = xspace_frame(path, args=kept)
    column = frame["args"]
    want = restricted(expected, kept)
    assert column.isna().tolist() == [d is None for d in want]
    for key in kept:
        got = stat_values(column, key).tolist()
        wanted = [d.get(key) if d else None for d in want]
        assert all(same_value(a, b) for a, b in zip(got, wanted, strict=True)), key
    names = {key for d in expected if d for key in d}
    for key in sorted(names - kept)[:2]:
        with pytest.raises(KeyError, match="not kept"):
            stat_values(column, key)
    rows = np.random.default_rng(0).choice(len(want), size=min(dicts, len(want)), replace=False)
    assert same_dicts(column.take(rows).tolist(), [want[row] for row in rows])
    others = frame.drop(columns="args")
    assert others.dtypes.equals(whole.drop(columns="args").dtypes)
    assert others.equals(whole.drop(columns="args"))


SMALL = ["mi300", "fused_attn", "torch_xla_cpu"]  # (thousands of events: many draws are cheap)


@pytest.mark.parametrize("name", SMALL)
@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_args_that_keep_some_stats_read_as_the_dicts_restricted(
    name: str, loaded: dict[str, Any], data: st.DataObject
) -> None:
    """A frame whose ``args`` keep some stats (``xspace_frame(args={...})``, as the pipeline
    loads a capture) reads as the reference dicts with the other stats left out (None where
    none is left), and its other columns are the whole frame's."""
    path, whole, expected = loaded[name]
    names = sorted({key for d in expected if d for key in d})
    kept = data.draw(st.sets(st.sampled_from([*names, "no such stat"]), max_size=4))
    check_kept(path, whole, expected, frozenset(kept), dicts=len(expected))


@pytest.mark.parametrize("name", sorted(set(CAPTURES) - set(SMALL)))
def test_large_captures_keep_the_analysis_stats(name: str, loaded: dict[str, Any]) -> None:
    """The same on the captures of tens of thousands of events, for the analysis's stats and
    one more of the capture's own."""
    path, whole, expected = loaded[name]
    other = sorted({key for d in expected if d for key in d} - STATS_READ)[0]
    check_kept(path, whole, expected, STATS_READ | {other}, dicts=2000)


def test_the_pipeline_keeps_the_stats_the_analysis_reads(
    loaded: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosts loaded in worker processes keep the stats asked for (their columns pickled
    back); the pipeline loads a capture with ``STATS_READ`` alone, and the device model made
    of it is the one made with every stat."""
    session = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    session.mkdir(parents=True)
    for host, name in (("a", "fused_attn"), ("b", "mi300")):
        (session / f"{host}.xplane.pb").symlink_to(loaded[name][0])
    kept = frozenset({"correlation_id"})
    trace = xlaprof.load_trace(tmp_path, lazy=False, workers=2, args=kept)
    want = restricted(loaded["fused_attn"][2] + loaded["mi300"][2], kept | STATS_READ)
    assert same_dicts(trace.events["args"].tolist(), want)
    with pytest.raises(KeyError, match="not kept"):
        stat_values(trace.events["args"], "no such stat")

    asked: list[frozenset[str] | None] = []
    made = EventStats.__init__

    def recording(self: EventStats, *args: Any) -> None:
        made(self, *args)
        asked.append(self.kept)

    monkeypatch.setattr(EventStats, "__init__", recording)
    path = loaded["tpu"][0]
    assert pipeline.analyze(AnalysisRequest.of(path)).parts
    assert asked == [STATS_READ]
    whole, held = xlaprof.load_trace(path), xlaprof.load_trace(path, args=STATS_READ)
    for table in ("steps", "ops", "lines", "bottleneck"):
        pd.testing.assert_frame_equal(
            getattr(whole.summary(), table), getattr(held.summary(), table)
        )


def test_a_trace_keeps_the_stats_its_tables_read_besides_those_asked_for(
    loaded: dict[str, Any],
) -> None:
    """``load_trace(args={...})`` keeps the stats named and ``STATS_READ``: the trace's device
    model is the one made with every stat; a stat neither names still raises."""
    path, _, expected = loaded["jax_cpu"]
    trace = xlaprof.load_trace(path, args=frozenset({"tf_op"}))
    column = trace.events["args"]
    want = restricted(expected, STATS_READ | {"tf_op"})
    assert column.isna().tolist() == [d is None for d in want]
    whole = xlaprof.load_trace(path)
    for table in ("steps", "ops"):
        pd.testing.assert_frame_equal(
            getattr(whole.summary(), table), getattr(trace.summary(), table)
        )
    other = sorted({key for d in expected if d for key in d} - STATS_READ - {"tf_op"})[0]
    with pytest.raises(KeyError, match="not kept"):
        stat_values(column, other)
