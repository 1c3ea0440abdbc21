"""The bare runtime's account of one corpus script, without xlaprof: the truth the manifest holds.

Runs the script in this process (``runpy``), wrapping ``torch_xla.sync`` only to note the
metrics after each call and which function called it, then prints one JSON line: every sync's
cumulative CompileTime / ExecuteTime / TransferFromDeviceTime sample counts and ``aten::``
counters, and the totals at the end (``torch_xla.debug.metrics``).

    PJRT_DEVICE=CPU python examples/corpus/measure_truth.py examples/corpus/healthy_mlp.py
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
    script = os.path.abspath(sys.argv[1])
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
    print(json.dumps({"syncs": syncs, "final": final}))


if __name__ == "__main__":
    main()
