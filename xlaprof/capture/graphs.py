"""Graph harvest: each compiled module's HLO, kept gzipped in ``graphs/`` with an index.

torch_xla dumps every module XLA compiles into a dump folder (``--xla_dump_to``). After a step
that compiled, the new pre-optimization HLO files (which carry the user's source file:line in
their metadata when IR debug is on) are gzipped into ``graphs/`` and everything else XLA wrote
(LLVM IR, objects) is deleted, so the run directory stays small. Each module's pre-optimization
HloProto (``--xla_dump_hlo_as_proto``) is kept beside its text: the text names only an op's
innermost frame, the proto's stack frame index holds the whole Python stack, which is how an op
made inside a library reaches the user's line that called it.

Source lines in a graph need torch_xla's IR debug, which records a Python stack for every op
traced: 20-100% more host tracing time on op-heavy steps. Graphs only need it on the steps that
compile, so ``SourceFrames`` keeps it on through warm-up, turns it off once compiles stay flat,
and turns it back on as soon as a compile happens while it is off (a graph that recompiles
usually does so again: its next versions get their lines). Toggling it between steps does not
change the graph hash, so it never causes a compilation.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

from xlaprof.rundir.schema import GRAPH_INDEX, GRAPHS_DIR

# Graph capture bounds: at most this many graphs, each at most this large (HLO text).
MAX_GRAPHS = 64
MAX_GRAPH_BYTES = 64 * 1024**2
DUMP_DIR = ".xla_dump"
_BEFORE = ".before_optimizations.txt"
_BEFORE_PROTO = ".before_optimizations.hlo.pb"
# IR debug goes off after this many steps in a row without a compilation.
FLAT_STEPS = 3
FRAMES_MODES = ("auto", "always")


class GraphHarvester:
    """Moves new HLO dumps of one run directory into ``graphs/`` (bounded in count and size)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.dump = directory / DUMP_DIR
        self.kept = 0
        self.frames_on: bool | None = None  # IR debug while the graphs being collected traced

    def xla_flags(self, flags: str) -> str:
        """``XLA_FLAGS`` with the dump options added (torch_xla reads them at first compile)."""
        dump = f"--xla_dump_to={self.dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
        return f"{flags} {dump}".strip()

    def collect(self, step: int, final: bool = False) -> None:
        """Keep each new module's pre-optimization HLO text and proto (gzipped); drop the rest."""
        if not self.dump.is_dir():
            return
        graphs = self.directory / GRAPHS_DIR
        graphs.mkdir(exist_ok=True)
        with (graphs / GRAPH_INDEX).open("a") as index:
            for path in sorted(self.dump.glob(f"module_*{_BEFORE}")):
                index.write(json.dumps(self._keep(path, step, graphs)) + "\n")
                path.unlink()
        for path in self.dump.iterdir():  # LLVM IR, objects, reports: not needed, often large
            if path.is_file() and not path.name.endswith((_BEFORE, _BEFORE_PROTO)):
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
        if self.frames_on is not None:
            record["source_lines"] = self.frames_on
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
            proto = path.with_name(path.name.removesuffix(_BEFORE) + _BEFORE_PROTO)
            if proto.is_file() and proto.stat().st_size <= MAX_GRAPH_BYTES:
                name = f"{path.name.removesuffix(_BEFORE)}.hlo.pb.gz"
                with proto.open("rb") as source, gzip.open(graphs / name, "wb") as target:
                    shutil.copyfileobj(source, target)
                record["proto"] = name
        path.with_name(path.name.removesuffix(_BEFORE) + _BEFORE_PROTO).unlink(missing_ok=True)
        return record


class SourceFrames:
    """Turns torch_xla's IR debug (per-op Python stacks) on only while compiles can happen.

    ``mode`` is ``"auto"`` (on through warm-up, off after ``FLAT_STEPS`` steps without a
    compile, back on after a compile while off) or ``"always"`` (on throughout: the cost of
    ``XLA_IR_DEBUG=1``). ``step(compiles)`` is called at each step boundary with the step's
    compile count; it returns whether IR debug was on while that step was traced, which is
    whether the graphs it compiled carry source lines.
    """

    def __init__(self, xlac: Any, mode: str = "auto", flat_steps: int = FLAT_STEPS) -> None:
        if mode not in FRAMES_MODES:
            raise ValueError(f"source frames mode must be one of {FRAMES_MODES}, not {mode!r}")
        self.xlac = xlac
        self.mode = mode
        self.flat_steps = flat_steps
        self.flat = 0
        self.switches = 0  # how many times it was turned on or off
        self.compiles_without = 0  # compilations traced while it was off
        self.available = hasattr(xlac, "_set_ir_debug") and hasattr(xlac, "_get_ir_debug")
        self.initial = bool(xlac._get_ir_debug()) if self.available else None
        self.on = True
        if self.available:
            xlac._set_ir_debug(True)

    def step(self, compiles: int) -> bool:
        """Account one finished step; switch IR debug for the next. Returns its state."""
        was_on = self.on
        if not self.available or self.mode == "always":
            return was_on
        if compiles:
            self.flat = 0
            if not was_on:
                self.compiles_without += compiles
                self._set(True)
        else:
            self.flat += 1
            if was_on and self.flat >= self.flat_steps:
                self._set(False)
        return was_on

    def _set(self, on: bool) -> None:
        self.xlac._set_ir_debug(on)
        self.on = on
        self.switches += 1

    def close(self) -> None:
        """Put IR debug back as it was before the session (``xlaprof run`` sets it on)."""
        if self.available and self.initial is not None and self.on != self.initial:
            self.xlac._set_ir_debug(self.initial)
            self.on = self.initial
