"""Graph harvest: each compiled module's HLO, kept gzipped in ``graphs/`` with an index.

torch_xla dumps every module XLA compiles into a dump folder (``--xla_dump_to``). After a step
that compiled, the new pre-optimization HLO files (which carry the user's source file:line in
their metadata when IR debug is on) are gzipped into ``graphs/``. In xlaprof's own dump folder
everything else XLA wrote (LLVM IR, objects) is deleted, so the run directory stays small; a
dump folder the user named in their own ``XLA_FLAGS`` is only read (its files are copied, never
moved or deleted), and xlaprof adds no ``--xla_dump_to`` of its own, which would replace theirs.
In xlaprof's own dump each module's pre-optimization HloProto (``--xla_dump_hlo_as_proto``) is
kept beside its text: the text names only an op's innermost frame, the proto's stack frame
index holds the whole Python stack, which is how an op made inside a library reaches the
user's line that called it.

XLA reads ``XLA_FLAGS`` once, when torch_xla's runtime client is created
(``torch_xla.device()``, the first tensor moved to the device). A session started after that
cannot switch the dump on; ``LiveGraphs`` then takes each graph from the live tensors at the
sync that compiles it (``torch_xla._XLAC._get_xla_tensors_hlo``: the same lowering, with the
same source metadata), through warm-up and at the step after each compile only, as it costs a
scan of the Python heap (left out of the steps' times).

Source lines in a graph need torch_xla's IR debug, which records a Python stack for every op
traced: 20-100% more host tracing time on op-heavy steps. Graphs only need it on the steps that
compile, so ``SourceFrames`` keeps it on through warm-up, turns it off once compiles stay flat,
and turns it back on as soon as a compile happens while it is off (a graph that recompiles
usually does so again: its next versions get their lines). Toggling it between steps does not
change the graph hash, so it never causes a compilation.
"""

from __future__ import annotations

import gc
import gzip
import json
import os
import re
import shlex
import shutil
from collections.abc import Callable
from itertools import compress, repeat
from pathlib import Path
from typing import Any

from xlaprof.rundir.schema import GRAPH_INDEX, GRAPHS_DIR

# Graph capture bounds: at most this many graphs, each at most this large (HLO text).
MAX_GRAPHS = 64
MAX_GRAPH_BYTES = 64 * 1024**2
DUMP_DIR = ".xla_dump"
_BEFORE = ".before_optimizations.txt"
_BEFORE_PROTO = ".before_optimizations.hlo.pb"
# IR debug goes off after this many steps in a row without a compile.
FLAT_STEPS = 3
# Live graph capture (a heap scan per sync) goes off after this many: the steps that compile
# and the one after each (a step that recompiles usually does so again, as in warm-up).
LIVE_FLAT_STEPS = 1
FRAMES_MODES = ("auto", "always")
_DUMP_TO = "xla_dump_to"
# --xla_dump_to values that name no folder (XLA writes to stdout or a test output location).
_NOT_A_FOLDER = ("-", "sponge", "test_undeclared_outputs_dir")
_TEXT_FORMATS = (
    "xla_dump_hlo_as_text",
    "xla_dump_hlo_as_proto",
    "xla_dump_hlo_as_dot",
    "xla_dump_hlo_as_html",
    "xla_dump_hlo_as_url",
)
_TENSOR_ID = re.compile(r"TensorID: (\d+)")


def dump_folder(flags: str) -> str | None:
    """The ``--xla_dump_to`` value in an ``XLA_FLAGS`` string (the last one wins, as in XLA)."""
    value = None
    try:
        words = shlex.split(flags)
    except ValueError:
        words = flags.split()
    for word in words:
        name, sep, rest = word.lstrip("-").partition("=")
        if name == _DUMP_TO and sep:
            value = rest
    return value or None


def needs_text_flag(flags: str) -> bool:
    """Whether XLA would dump no HLO text with these flags: it dumps text by default only when
    no ``--xla_dump_hlo_as_*`` format is named."""
    named = {w.lstrip("-").partition("=")[0] for w in flags.split()}
    return bool(named & set(_TEXT_FORMATS)) and "xla_dump_hlo_as_text" not in named


def user_dump(flags: str, cwd: str) -> Path | str | None:
    """The folder the user's own ``--xla_dump_to`` names (a Path), the value itself when it
    names no folder xlaprof can read (a str), or None without one."""
    value = dump_folder(flags)
    if value is None:
        return None
    if value in _NOT_A_FOLDER:
        return value
    return Path(cwd, value)


class GraphHarvester:
    """Keeps new HLO of one run directory in ``graphs/`` (bounded in count and size).

    ``dump`` is the folder XLA dumps into; ``owned`` says whether it is xlaprof's own (files
    are moved out and the rest deleted) or the user's (files are copied, nothing deleted, and
    files there before the session started are left alone). Without a dump folder only
    ``keep_text`` (live capture) adds graphs.
    """

    def __init__(self, directory: Path, dump: Path | None = None, owned: bool = True) -> None:
        self.directory = directory
        self.dump = directory / DUMP_DIR if dump is None and owned else dump
        self.owned = owned
        self.kept = 0
        self.recorded = 0  # index entries written, kept or skipped
        self.frames_on: bool | None = None  # IR debug while the graphs being collected traced
        self._seen: dict[str, int] = {}  # user dump: file -> mtime (ns) already read or old
        self._live_order = 0
        if not owned and self.dump is not None and self.dump.is_dir():
            for path in self.dump.glob(f"module_*{_BEFORE}"):
                self._seen[path.name] = _mtime(path)

    def xla_flags(self, flags: str) -> str:
        """``XLA_FLAGS`` with the dump options added (torch_xla reads them at first compile)."""
        dump = f"--xla_dump_to={self.dump} --xla_dump_hlo_as_text --xla_dump_hlo_as_proto"
        return f"{flags} {dump}".strip()

    def collect(self, step: int, final: bool = False) -> None:
        """Keep each new module's pre-optimization HLO (gzipped, with its HloProto); in
        xlaprof's own dump folder, drop the rest of the dump."""
        if self.dump is None or not self.dump.is_dir():
            return
        graphs = self.directory / GRAPHS_DIR
        graphs.mkdir(exist_ok=True)
        with (graphs / GRAPH_INDEX).open("a") as index:
            for path in sorted(self.dump.glob(f"module_*{_BEFORE}")):
                if not self.owned:
                    mtime = _mtime(path)
                    if self._seen.get(path.name) == mtime:
                        continue
                    self._seen[path.name] = mtime
                record = self._keep(path, step, graphs)
                index.write(json.dumps(record) + "\n")
                if self.owned:
                    path.unlink()
        if not self.owned:
            return
        for path in self.dump.iterdir():  # LLVM IR, objects, reports: not needed, often large
            if path.is_file() and not path.name.endswith((_BEFORE, _BEFORE_PROTO)):
                path.unlink()
        if final:
            shutil.rmtree(self.dump, ignore_errors=True)

    def _keep(self, path: Path, step: int, graphs: Path) -> dict[str, object]:
        order, _, rest = path.name.partition(".")
        size = path.stat().st_size
        number = int(order.removeprefix("module_"))
        record = self._record(number, rest.removesuffix(_BEFORE), step, size, self.frames_on)
        if "skipped" not in record and size > MAX_GRAPH_BYTES:
            record["skipped"] = f"larger than {MAX_GRAPH_BYTES} bytes"
        if "skipped" not in record:
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
        if self.owned:
            path.with_name(path.name.removesuffix(_BEFORE) + _BEFORE_PROTO).unlink(missing_ok=True)
        return record

    def keep_text(self, text: str, step: int, frames_on: bool | None) -> None:
        """Keep one graph's HLO text taken from the live tensors (``LiveGraphs``)."""
        graphs = self.directory / GRAPHS_DIR
        graphs.mkdir(exist_ok=True)
        self._live_order += 1
        data = text.encode("utf-8")
        record = self._record(self._live_order, _module_name(text), step, len(data), frames_on)
        record["captured"] = "live"
        if "skipped" not in record and len(data) > MAX_GRAPH_BYTES:
            record["skipped"] = f"larger than {MAX_GRAPH_BYTES} bytes"
        if "skipped" not in record:
            name = f"live_{self._live_order:04d}.hlo.txt.gz"
            with gzip.open(graphs / name, "wb") as target:
                target.write(data)
            record["file"] = name
            self.kept += 1
        with (graphs / GRAPH_INDEX).open("a") as index:
            index.write(json.dumps(record) + "\n")

    def _record(
        self, order: int, module: str, step: int, size: int, frames_on: bool | None
    ) -> dict[str, object]:
        record: dict[str, object] = {
            "order": order,
            "module": module,
            "step": step,
            "bytes": size,
            "file": None,
        }
        if frames_on is not None:
            record["source_lines"] = frames_on
        if self.kept >= MAX_GRAPHS:
            record["skipped"] = f"more than {MAX_GRAPHS} graphs"
        self.recorded += 1
        return record


class LiveGraphs:
    """Each graph a sync compiles, taken from the live tensors just before the sync runs.

    For a session started after torch_xla's runtime client exists, when XLA's dump can no
    longer be switched on. Before a sync (``before``) it finds the live XLA tensors whose
    values are still pending (``gc``: the Python heap and its leaves' gradients, ~0.1-0.5 s on
    a script that imported transformers, measured on the 2-core CPU runtime), hashes their
    graph and, for a hash not seen yet, lowers it to HLO text; after the sync (``after``) it
    keeps that text if the sync compiled, and counts in ``unseen`` a sync that compiled with
    no new graph to keep. It works only while ``wanted``: at the first step, and at the step
    after each step that compiled (so through warm-up, and from the second of repeated
    recompiles on; a single late recompile is missed, and the session says so). Graphs
    compiled outside ``torch_xla.sync`` (a ``.item()`` mid-step, ``torch.compile``) are not
    seen either: the session compares the graphs kept with the compiles. Its time is left out
    of the steps'.
    """

    def __init__(
        self,
        xlac: Any,
        harvester: GraphHarvester,
        compiles: Callable[[], int],
        flat_steps: int = LIVE_FLAT_STEPS,
    ) -> None:
        self.xlac = xlac
        self.harvester = harvester
        self.compiles = compiles  # the runtime's CompileTime sample count
        self.flat_steps = flat_steps
        self.flat = 0
        self.seen: set[bytes] = set()
        # syncs that compiled while the tensors found made a graph already taken (or none):
        # the graph compiled differed only in tensors only torch's C++ side holds
        self.unseen = 0
        self.error: str | None = None
        self._pending: tuple[bytes, str] | None = None
        self._looked = False  # whether ``before`` looked for this sync's tensors
        self._before = 0

    @property
    def wanted(self) -> bool:
        return self.error is None and self.flat < self.flat_steps

    def before(self) -> None:
        """Called by the sync hook before the sync runs; never raises."""
        self._pending, self._looked = None, False
        try:
            if not self.wanted:
                return
            self._before = self.compiles()
            tensors = _pending_tensors(self.xlac)
            if tensors:
                key = bytes(self.xlac._get_graph_hash(tensors))
                if key not in self.seen:
                    self._pending = (key, self.xlac._get_xla_tensors_hlo(tensors))
            self._looked = True
        except Exception as error:  # the training job must go on: stop capturing, say why
            self.error = f"{type(error).__name__}: {error}"

    def after(self, step: int, frames_on: bool | None) -> None:
        """Called by the sync hook after the sync ran; keeps the graph if it compiled."""
        try:
            pending, self._pending = self._pending, None
            compiled = self._looked and self.compiles() > self._before
            if pending is None:
                self.unseen += compiled
                return
            self.seen.add(pending[0])
            if compiled:
                self.harvester.keep_text(pending[1], step, frames_on)
        except Exception as error:
            self.error = f"{type(error).__name__}: {error}"

    def step(self, compiles: int) -> None:
        """Account one finished step: capture stays on at the step after one that compiled."""
        self.flat = 0 if compiles else self.flat + 1


def _pending_tensors(xlac: Any) -> list[Any]:
    """The live XLA tensors whose values a sync would compute now (not plain device data), in
    the order a sync takes them: torch_xla keeps live tensors by id, in creation order, and the
    graph's instructions follow that order (the unrolled-loop search reads it).

    Those are the XLA tensors on the Python heap and the gradients of its XLA leaves (see
    ``_xla_tensors``). Live tensors that only torch's C++ side holds are not among them: the
    base of a view (a gradient is often a view of one) and the tensors autograd saved for a
    backward pass not run yet. Their ops are those of tensors found (a view reads its base,
    a saved tensor is an intermediate of an output), so the graph taken here computes what
    XLA's does with fewer outputs; a sync that differs from an earlier one only in those is
    not taken (``LiveGraphs.unseen`` counts it)."""
    pending: dict[int, Any] = {}
    for tensor in _xla_tensors():
        try:
            info = xlac._get_xla_tensor_debug_info(tensor)
        except Exception:  # a wrapper subclass, a tensor being freed: not a sync output
            continue
        if "XLAData:" in info and "XLAData: None" not in info:
            continue  # device data: nothing to compute
        match = _TENSOR_ID.search(info)
        key = int(match.group(1)) if match else -len(pending) - 1
        pending.setdefault(key, tensor)  # views of one tensor share its id: once is enough
    return [pending[key] for key in sorted(pending)]


def _xla_tensors() -> list[Any]:
    """The XLA tensors on the Python heap (``gc``), and the gradient of each that is a leaf.

    Autograd keeps a gradient in C++: it has no Python object, so ``gc`` does not list it,
    until its ``.grad`` is read (reading it makes one, and changes no graph). A loop that syncs
    between ``backward()`` and the optimizer's step (accumulating gradients over several
    synced micro-batches) never reads it before the sync, which computes the gradients all the
    same: without them the graph taken had the loss only, and each next micro-batch's graph
    (the same loss) looked already taken."""
    import torch

    objects = gc.get_objects()
    try:
        # by type, not isinstance: isinstance also reads an object's ``__class__``, and some
        # module attributes warn when read (torch.distributed.reduce_op's FutureWarning reached
        # the user's stderr); a tensor's type is a subclass of TensorBase
        kinds = map(type, objects)
        tensors = list(compress(objects, map(issubclass, kinds, repeat(torch._C.TensorBase))))
    finally:
        del objects
    found: list[Any] = []
    gradients: list[Any] = []
    for tensor in tensors:
        try:
            if tensor.device.type != "xla":
                continue
            found.append(tensor)
            # a non-leaf's .grad is read only where it keeps one (reading it otherwise warns)
            if tensor.requires_grad and (tensor.is_leaf or tensor.retains_grad):
                gradient = tensor.grad
                if gradient is not None:
                    gradients.append(gradient)
        except Exception:  # a wrapper subclass, a tensor being freed: not a sync output
            continue
    return found + gradients


def _module_name(text: str) -> str:
    first = text.split("\n", 1)[0]
    if first.startswith("HloModule "):
        return first.split()[1].rstrip(",")
    return "live"


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


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
