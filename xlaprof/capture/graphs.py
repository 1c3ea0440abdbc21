"""Graph harvest: each compiled module's HLO, kept gzipped in ``graphs/`` with an index.

torch_xla dumps every module XLA compiles into a dump folder (``--xla_dump_to``). After a step
that compiled, the new pre-optimization HLO files (which carry the user's source file:line in
their metadata when IR debug is on) are gzipped into ``graphs/`` and everything else XLA wrote
(LLVM IR, objects) is deleted, so the run directory stays small.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

from xlaprof.rundir.schema import GRAPH_INDEX, GRAPHS_DIR

# Graph capture bounds: at most this many graphs, each at most this large (HLO text).
MAX_GRAPHS = 64
MAX_GRAPH_BYTES = 64 * 1024**2
DUMP_DIR = ".xla_dump"
_BEFORE = ".before_optimizations.txt"


class GraphHarvester:
    """Moves new HLO dumps of one run directory into ``graphs/`` (bounded in count and size)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.dump = directory / DUMP_DIR
        self.kept = 0

    def xla_flags(self, flags: str) -> str:
        """``XLA_FLAGS`` with the dump options added (torch_xla reads them at first compile)."""
        return f"{flags} --xla_dump_to={self.dump} --xla_dump_hlo_as_text".strip()

    def collect(self, step: int, final: bool = False) -> None:
        """Keep each new module's pre-optimization HLO (gzipped); drop the rest of the dump."""
        if not self.dump.is_dir():
            return
        graphs = self.directory / GRAPHS_DIR
        graphs.mkdir(exist_ok=True)
        with (graphs / GRAPH_INDEX).open("a") as index:
            for path in sorted(self.dump.glob(f"module_*{_BEFORE}")):
                index.write(json.dumps(self._keep(path, step, graphs)) + "\n")
                path.unlink()
        for path in self.dump.iterdir():  # LLVM IR, objects, reports: not needed, often large
            if path.is_file() and not path.name.endswith(_BEFORE):
                path.unlink()
        if final:
            shutil.rmtree(self.dump, ignore_errors=True)

    def _keep(self, path: Path, step: int, graphs: Path) -> dict[str, object]:
        order, _, rest = path.name.partition(".")
        size = path.stat().st_size
        record: dict[str, object] = {
            "order": int(order.removeprefix("module_")),
            "module": rest.removesuffix(_BEFORE),
            "step": step,
            "bytes": size,
            "file": None,
        }
        if self.kept >= MAX_GRAPHS:
            record["skipped"] = f"more than {MAX_GRAPHS} graphs"
        elif size > MAX_GRAPH_BYTES:
            record["skipped"] = f"larger than {MAX_GRAPH_BYTES} bytes"
        else:
            name = f"{path.name.removesuffix(_BEFORE)}.hlo.txt.gz"
            with path.open("rb") as source, gzip.open(graphs / name, "wb") as target:
                shutil.copyfileobj(source, target)
            record["file"] = name
            self.kept += 1
        return record
