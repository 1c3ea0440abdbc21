"""The bare runtime's account of one corpus script, without xlaprof: the truth the manifest holds.

Runs the script in this process (``runpy``), wrapping ``torch_xla.sync`` only to note the
metrics after each call and which function called it, then prints one JSON line: every sync's
cumulative CompileTime / ExecuteTime / TransferFromDeviceTime sample counts and ``aten::``
counters, and the totals at the end (``torch_xla.debug.metrics``), with the
UncachedCompile/CachedCompile counters (the only compile counts eager mode fills: there every op
is its own graph and CompileTime records nothing). It works on a script in any folder (the
corpus, examples/realcode). ``--toml NAME`` prints the manifest's ``[NAME.bare]`` table instead:
compiles are CompileTime's samples, or UncachedCompile where CompileTime recorded none.

    PJRT_DEVICE=CPU python examples/corpus/measure_truth.py examples/corpus/healthy_mlp.py
    PJRT_DEVICE=CPU python examples/corpus/measure_truth.py --toml hf_gpt2_decode \
        examples/realcode/hf_gpt2_decode.py
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import sys
from typing import Any

_METRICS = ("CompileTime", "ExecuteTime", "TransferFromDeviceTime", "TransferToDeviceTime")


def main() -> None:
    arguments = sys.argv[1:]
    table = None
    if arguments[:1] == ["--toml"]:
        table, arguments = arguments[1], arguments[2:]
    script = os.path.abspath(arguments[0])
    sys.argv = [script]
    sys.path.insert(0, os.path.dirname(script))
    import torch_xla
    import torch_xla.debug.metrics as met

    def snapshot() -> dict[str, Any]:
        values: dict[str, Any] = {}
        for name in _METRICS:
            data = met.metric_data(name)
            values[name] = data[0] if data else 0
        values["aten"] = {
            n: met.counter_value(n) for n in met.counter_names() if n.startswith("aten::")
        }
        return values

    syncs = []
    original = torch_xla.sync

    def sync(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        row = snapshot()
        caller = sys._getframe(1).f_code
        row["caller"] = f"{os.path.basename(caller.co_filename)}:{caller.co_name}"
        syncs.append(row)
        return result

    torch_xla.sync = sync
    sys.modules["torch_xla.torch_xla"].sync = sync  # torch_xla.compile calls this one
    with contextlib.suppress(SystemExit):
        runpy.run_path(script, run_name="__main__")
    final = snapshot()
    final["MarkStep"] = met.counter_value("MarkStep")
    for counter in ("UncachedCompile", "CachedCompile"):
        final[counter] = met.counter_value(counter) or 0
    if table is None:
        print(json.dumps({"syncs": syncs, "final": final}))
    else:
        print(bare_table(table, syncs, final))


def bare_table(name: str, syncs: list[dict[str, Any]], final: dict[str, Any]) -> str:
    """The manifest's ``[name.bare]`` table for one measured run."""
    compiles = final["CompileTime"] or final["UncachedCompile"]
    aten = ", ".join(f'"{op}" = {count}' for op, count in sorted(final["aten"].items()))
    return "\n".join(
        [
            f"[{name}.bare]",
            f"syncs = {len(syncs)}",
            f"compiles = {compiles}",
            f"executions = {final['ExecuteTime']}",
            f"device_to_host = {final['TransferFromDeviceTime']}",
            f"uncached_compiles = {final['UncachedCompile']}",
            f"cached_compiles = {final['CachedCompile']}",
            f"aten = {{ {aten} }}" if aten else "aten = {}",
        ]
    )


if __name__ == "__main__":
    main()
