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

from typing import TYPE_CHECKING

if TYPE_CHECKING:
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
    import pandas as pd

    empty = pd.DataFrame(
        {
            "file": pd.Series([None] * len(frame), dtype=object),
            "line": pd.array([None] * len(frame), dtype="Int64"),
            "function": pd.Series([None] * len(frame), dtype=object),
        }
    )
    empty.index = frame.index
    if sources is None or sources.empty or frame.empty:
        return empty
    known = sources[sources["user_file"].notna()]
    full: dict[tuple[str, str, str, str], tuple[str, int, str]] = {}
    by_program: dict[tuple[str, str, str], tuple[str, int, str]] = {}
    by_module: dict[tuple[str, str, str], tuple[str, int, str]] = {}
    columns = ["user_file", "user_line", "user_function", "host", "module", "program_id"]
    for file, line, function, host, module, program, instruction in known[
        [*columns, "instruction"]
    ].itertuples(index=False, name=None):
        where = (file, line, function)
        host, module, instruction = str(host), str(module), str(instruction)
        if program is not None and program == program:
            full.setdefault((host, module, str(program), instruction), where)
            by_program.setdefault((host, str(program), instruction), where)
        by_module.setdefault((host, module, instruction), where)
    ops = frame["op_line"].to_numpy()
    keyed = pd.DataFrame(
        {
            "host": frame["host"].astype(str).to_numpy(),
            "module": frame["hlo_module"].astype(object).to_numpy(),
            "program": frame["program_id"].astype(object).to_numpy(),
            "op": frame["op"].astype(object).to_numpy(),
        }
    )[ops]
    # one lookup per distinct (host, module, program, op), not per event
    distinct = keyed.drop_duplicates()
    found: list[tuple[str, int, str] | tuple[None, None, None]] = []
    for host, hlo_module, program_id, op in distinct.itertuples(index=False, name=None):
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
    distinct["file"] = [f[0] for f in found]
    distinct["line"] = pd.array([f[1] for f in found], dtype="Int64")
    distinct["function"] = [f[2] for f in found]
    joined = keyed.merge(distinct, on=["host", "module", "program", "op"], how="left")
    result = empty.copy()
    index = frame.index[ops]
    result.loc[index, "file"] = joined["file"].to_numpy()
    result["line"] = result["line"].astype("Int64")
    result.loc[index, "line"] = joined["line"].to_numpy()
    result.loc[index, "function"] = joined["function"].to_numpy()
    return result


def device_time_by_line(frame: pd.DataFrame, sources: pd.DataFrame | None) -> pd.DataFrame:
    """Per session, host, device, category and user line: op self time (``LINE_COLUMNS``)."""
    import numpy as np
    import pandas as pd

    ops = frame[frame["op_line"].to_numpy() & frame["compute"].to_numpy()]
    if ops.empty or sources is None or sources.empty:
        return pd.DataFrame(columns=LINE_COLUMNS)
    where = event_lines(ops, sources)
    table = pd.DataFrame(
        {
            "session": ops["session"].astype(str).to_numpy(),
            "host": ops["host"].astype(str).to_numpy(),
            "device": ops["device"].astype(str).to_numpy(),
            "category": ops["category"].astype(str).to_numpy(),
            "file": where["file"].fillna("").to_numpy(),
            "line": where["line"].fillna(0).to_numpy(dtype=np.int64),
            "function": where["function"].fillna("").to_numpy(),
            "module": ops["hlo_module"].astype(object).fillna("").astype(str).to_numpy(),
            "op": ops["op"].astype(str).to_numpy(),
            "self_ns": np.nan_to_num(ops["self_ns"].to_numpy(dtype=np.float64)),
        }
    )
    keys = ["session", "host", "device", "category", "file", "line", "function", "module"]
    grouped = table.groupby(keys, sort=False)
    result = grouped.agg(
        device_s=("self_ns", "sum"), executions=("op", "size"), ops=("op", "nunique")
    ).reset_index()
    result["device_s"] = result["device_s"] / 1e9
    per_op = table.groupby([*keys, "op"], sort=False)["self_ns"].sum().reset_index()
    top = per_op.sort_values("self_ns", ascending=False).drop_duplicates(keys)
    result = result.merge(top[[*keys, "op"]].rename(columns={"op": "top_op"}), on=keys)
    for column in ("file", "function", "module"):
        result[column] = result[column].replace("", None)
    result["line"] = result["line"].astype("Int64").where(result["file"].notna())
    return result.sort_values("device_s", ascending=False, ignore_index=True)[LINE_COLUMNS]


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
        modules=("module", lambda v: sorted({m for m in v if isinstance(m, str)})),
        categories=("category", lambda v: sorted(set(v))),
    ).reset_index()
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
