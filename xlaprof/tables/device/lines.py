"""Device time at the user's source line: each device op joined to the HLO instruction it ran.

A device op event names its program and instruction: ``hlo_module`` and ``hlo_op`` on GPU and
CPU events, ``program_id`` and the op name on TPU ones. The instruction's source
(``xlaprof.parse.hlo_sources.instruction_sources``: the capture's embedded HLO protos; in a run
directory also its harvested graphs) gives the innermost frame in the user's code. Device time
is **self time** (a wrapper such as ``call.4`` adds only its own microseconds; the fusions
inside it carry theirs), so the lines add up to the device's op time, never more.

``LINE_COLUMNS``: per session, host, device, category and user line (``file``, ``line``,
``function``; all None for op time with no user frame: compiler-inserted copies, autotuning,
autograd's backward ops that torch_xla records without a Python frame), the seconds, the
number of op executions and distinct ops, and the op with the most time there. ``by_line``
sums them over devices and categories, with each line's share of all op time.

``xlaprof.region`` marks host time; a device op runs after the step's sync, outside any
region, so a region's device time can only be told apart when the region is a graph of its
own (``module`` names the programs a line's ops ran in, so a region compiled on its own shows
as its module).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from xlaprof.tables import categorical as cols

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd


LINE_COLUMNS = [
    "session",
    "host",
    "device",
    "category",
    "file",
    "line",
    "function",
    "module",
    "device_s",
    "executions",
    "ops",
    "top_op",
]
BY_LINE_COLUMNS = [
    "file",
    "line",
    "function",
    "device_s",
    "share",
    "executions",
    "ops",
    "top_op",
    "modules",
    "categories",
]


def event_lines(frame: pd.DataFrame, sources: pd.DataFrame | None) -> pd.DataFrame:
    """``file``, ``line``, ``function`` of each op-line event of ``frame`` (None where unknown).

    ``sources`` has ``SOURCE_COLUMNS`` (``xlaprof.parse.hlo_sources``) and a ``host`` column.
    An event is looked up by (host, module, program id, instruction), else by program id and
    instruction (TPU events name no module), else by module and instruction.
    """
    import numpy as np
    import pandas as pd

    file = np.full(len(frame), None, dtype=object)
    function = np.full(len(frame), None, dtype=object)
    line = pd.array([None] * len(frame), dtype="Int64")
    rows = np.flatnonzero(frame["op_line"].to_numpy(dtype=bool))
    if sources is not None and not sources.empty and len(rows):
        where, found = _event_lines(frame, rows, sources)
        file[rows] = np.array([f[0] for f in found], dtype=object)[where]
        function[rows] = np.array([f[2] for f in found], dtype=object)[where]
        line[rows] = pd.array([f[1] for f in found], dtype="Int64")[where]
    return pd.DataFrame({"file": file, "line": line, "function": function}, index=frame.index)


Found = tuple[str, int, str] | tuple[None, None, None]


def _event_lines(
    frame: pd.DataFrame, rows: np.ndarray, sources: pd.DataFrame, op_codes: np.ndarray | None = None
) -> tuple[np.ndarray, list[Found]]:
    """The user line of each event at ``rows`` of ``frame`` (as in ``event_lines``): per row,
    an index into the list of (file, line, function) found, (None, None, None) for none.
    Looked up once per distinct (host, module, program, op), through the columns' codes.
    ``op_codes``: the codes of ``frame["op"]`` at ``rows``, where the caller has them."""

    known = sources[sources["user_file"].notna()]
    full: dict[tuple[str, str, str, str], tuple[str, int, str]] = {}
    by_program: dict[tuple[str, str, str], tuple[str, int, str]] = {}
    by_module: dict[tuple[str, str, str], tuple[str, int, str]] = {}
    columns = ["user_file", "user_line", "user_function", "host", "module", "program_id"]
    # (each column as a list, zipped: itertuples steps through Arrow text one value a call)
    for file, line, function, host, module, program, instruction in zip(
        *(known[name].tolist() for name in [*columns, "instruction"]), strict=True
    ):
        where = (file, line, function)
        host, module, instruction = str(host), str(module), str(instruction)
        if program is not None and program == program:
            full.setdefault((host, module, str(program), instruction), where)
            by_program.setdefault((host, str(program), instruction), where)
        by_module.setdefault((host, module, instruction), where)
    if op_codes is None:
        op_codes = cols.codes(frame["op"].take(rows))
    keys = [cols.codes(frame[name])[rows] for name in ("host", "hlo_module", "program_id")]
    # one lookup per distinct (host, module, program, op), not per event
    group, firsts = cols.group_codes([*keys, op_codes])
    at = rows[firsts]
    hosts = frame["host"].take(at).astype(str).tolist()
    modules = frame["hlo_module"].take(at).astype(object).tolist()
    programs = frame["program_id"].take(at).astype(object).tolist()
    ops = frame["op"].take(at).tolist()
    found: list[Found] = []
    for host, hlo_module, program_id, op in zip(hosts, modules, programs, ops, strict=True):
        in_module = None if hlo_module is None or hlo_module != hlo_module else str(hlo_module)
        in_program = None if program_id is None or program_id != program_id else str(program_id)
        hit = None
        if in_module is not None and in_program is not None:
            hit = full.get((host, in_module, in_program, str(op)))
        if hit is None and in_program is not None:
            hit = by_program.get((host, in_program, str(op)))
        if hit is None and in_module is not None:
            hit = by_module.get((host, in_module, str(op)))
        found.append((None, None, None) if hit is None else hit)
    return group, found


def device_time_by_line(frame: pd.DataFrame, sources: pd.DataFrame | None) -> pd.DataFrame:
    """Per session, host, device, category and user line: op self time (``LINE_COLUMNS``)."""
    import numpy as np
    import pandas as pd

    rows = np.flatnonzero(frame["op_line"].to_numpy(dtype=bool) & frame["compute"].to_numpy())
    if not len(rows) or sources is None or sources.empty:
        return pd.DataFrame(columns=LINE_COLUMNS)
    op_codes, op_names = cols.refactorize(*_at(cols.coded(frame["op"]), rows))
    where, found = _event_lines(frame, rows, sources, op_codes)
    # the keys as grouped: a missing file or function is "", a missing line 0
    filled = [
        ("" if f is None else f, 0 if n is None or n != n else int(n), "" if g is None else g)
        for f, n, g in found
    ]
    place = cols.group_codes([cols.codes(pd.Series(filled, dtype=object))])[0][where]
    module = frame["hlo_module"]
    key_codes = [
        *(cols.codes(frame[name])[rows] for name in ("session", "host", "device", "category")),
        place,
        _filled_codes(module)[rows],
    ]
    # One integer per distinct key (in order of first appearance, as groupby(sort=False)
    # orders groups), so each group is summed over the same events in the same order as
    # grouping by the text columns would, without hashing eight strings an event.
    group, firsts = cols.group_codes(key_codes)
    at = rows[firsts]
    triples = [filled[i] for i in where[firsts].tolist()]
    self_ns = pd.Series(np.nan_to_num(frame["self_ns"].to_numpy(dtype=np.float64)[rows]))
    per_op, first_op = cols.group_codes([group, op_codes])
    per_group = self_ns.groupby(per_op, sort=False).sum()
    top = pd.DataFrame(
        {"group": group[first_op], "op": op_codes[first_op], "self_ns": per_group.to_numpy()}
    )
    top = top.sort_values("self_ns", ascending=False).drop_duplicates("group")
    names = np.array([str(name) for name in op_names], dtype=object)
    top_op = np.empty(len(firsts), dtype=object)
    top_op[top["group"].to_numpy()] = names[top["op"].to_numpy()]
    files = _blank_missing([str(t[0]) for t in triples])
    # the table built once from its columns ("" read as missing in its text columns)
    result = pd.DataFrame(
        {
            **{
                name: [str(v) for v in frame[name].take(at).to_numpy(dtype=object).tolist()]
                for name in ("session", "host", "device", "category")
            },
            "file": files,
            "line": pd.arrays.IntegerArray(
                np.array([t[1] for t in triples], dtype=np.int64), np.asarray(files.isna())
            ),
            "function": _blank_missing([str(t[2]) for t in triples]),
            "module": _blank_missing(
                [str(v) for v in module.take(at).astype(object).fillna("").tolist()]
            ),
            # sums through pandas' grouped sum (compensated), as the table always summed
            "device_s": self_ns.groupby(group, sort=False).sum().to_numpy() / 1e9,
            "executions": np.bincount(group, minlength=len(firsts)),
            "ops": np.bincount(group[first_op], minlength=len(firsts)),
            "top_op": top_op.tolist(),
        }
    )
    # stable: rows of equal seconds stay in the order of their events (one host's before the
    # next's), the order ``merge_summaries`` gives several hosts' tables
    result = result.sort_values("device_s", ascending=False, kind="stable", ignore_index=True)
    return result[LINE_COLUMNS]


def _blank_missing(texts: list[str]) -> Any:
    """A text column of ``texts`` with "" read as missing: what ``replace("", None)`` makes of
    the column of those strings (its text type kept)."""
    import pandas as pd

    dtype: Any = pd.Series(texts).dtype
    values: list[Any] = [text or None for text in texts]
    return pd.array(values, dtype=dtype)


def _at(coded: tuple[np.ndarray, list[Any]], rows: np.ndarray) -> tuple[np.ndarray, list[Any]]:
    """Codes and their values (``categorical.coded``) of ``rows`` only."""
    return coded[0][rows], coded[1]


def _filled_codes(column: pd.Series) -> np.ndarray:
    """The codes of ``column.astype(object).fillna("")``: a missing value the code of "" (a
    code of its own where no value is "")."""
    import numpy as np

    codes, values = cols.coded(column)
    if not (codes < 0).any():
        return codes
    blank = values.index("") if "" in values else len(values)
    return np.where(codes < 0, blank, codes)


def by_line(table: pd.DataFrame, categories: set[str] | None = None) -> pd.DataFrame:
    """``device_time_by_line`` summed over hosts, devices and categories (those of
    ``categories`` only, if given): per user line, its seconds and share of all op time, the
    programs and categories it ran in; the row with no ``file`` is op time with no user line."""
    import pandas as pd

    if table.empty:
        return pd.DataFrame(columns=BY_LINE_COLUMNS)
    if categories is not None:
        table = table[table["category"].isin(categories)]
        if table.empty:
            return pd.DataFrame(columns=BY_LINE_COLUMNS)
    total = float(table["device_s"].sum())
    keyed = table.assign(
        file=table["file"].fillna(""),
        line=table["line"].fillna(0).astype("int64"),
        function=table["function"].fillna(""),
    )
    grouped = keyed.groupby(["file", "line", "function"], sort=False)
    result = grouped.agg(
        device_s=("device_s", "sum"),
        executions=("executions", "sum"),
        ops=("ops", "sum"),
        top_op=("top_op", "first"),
    ).reset_index()
    # each line's programs and categories: one pass over the rows, not a Python call per group
    modules: list[set[str]] = [set() for _ in range(len(result))]
    kinds: list[set[Any]] = [set() for _ in range(len(result))]
    for group, module, category in zip(
        grouped.ngroup().tolist(), keyed["module"].tolist(), keyed["category"].tolist(), strict=True
    ):
        if isinstance(module, str):
            modules[group].add(module)
        kinds[group].add(category)
    result["modules"] = [sorted(m) for m in modules]
    result["categories"] = [sorted(k) for k in kinds]
    result["share"] = result["device_s"] / total if total > 0 else float("nan")
    for column in ("file", "function"):
        result[column] = result[column].replace("", None)
    result["line"] = result["line"].astype("Int64").where(result["file"].notna())
    return result.sort_values("device_s", ascending=False, ignore_index=True)[BY_LINE_COLUMNS]


def line_coverage(table: pd.DataFrame) -> float | None:
    """The share of op self time that reached a user line (None without any op time)."""
    if table.empty:
        return None
    total = float(table["device_s"].sum())
    if total <= 0:
        return None
    return float(table.loc[table["file"].notna(), "device_s"].sum()) / total
