"""Keeping a session's compiled graphs, from wherever this process can still get them.

XLA reads ``XLA_FLAGS`` once, when torch_xla's runtime client is created. Before that, a dump
folder can be set: xlaprof's own, whose files are moved into the run's ``graphs/``, or the
user's own ``--xla_dump_to``, which is kept and read (copied, never moved). After it, only a
folder already in place dumps, and otherwise the graphs are taken from the live tensors at
each sync (``LiveGraphs``), at a cost kept out of the steps' times. At the end the run says
what was not captured, and what that loses.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from xlaprof.capture.graphs import (
    GraphHarvester,
    LiveGraphs,
    SourceFrames,
    needs_text_flag,
    user_dump,
)
from xlaprof.capture.metrics import StepMetrics

# The folder XLA dumps compiled modules into in this process, as xlaprof set it or found it
# before the runtime client was created (XLA reads XLA_FLAGS then, once), and whether it is
# xlaprof's own folder (files moved out) or the user's (files copied).
_DUMP: dict[str, tuple[Path, bool] | None] = {"folder": None}
# What a run loses without graphs, said wherever graphs are missing.
WITHOUT_GRAPHS = "no unrolled-loop findings and no 'what changed' for recompilations"


class GraphCapture:
    """A session's compiled graphs: where they come from, and what was missed.

    ``warn`` records a warning for run.json; ``warn_loud`` also prints it when the session
    ends (a warning about lost graphs must not go unseen).
    """

    def __init__(
        self,
        directory: Path,
        metrics: StepMetrics,
        warn: Callable[[str], None],
        warn_loud: Callable[[str], None],
    ) -> None:
        self.directory = directory
        self.metrics = metrics
        self.warn = warn
        self.warn_loud = warn_loud
        self.harvester: GraphHarvester | None = None
        self.frames: SourceFrames | None = None
        self.live: LiveGraphs | None = None  # graphs from live tensors (runtime started first)
        self.compiles_at_start = metrics.metric("CompileTime")[0]
        # Live capture's cost in the step in progress: wall s, CPU s, CPU s after the sync
        # (inside the sync's own CPU time); and its wall seconds over the whole run.
        self.cost = [0.0, 0.0, 0.0]
        self.cost_total = 0.0

    def setup(self, xlac: Any, source_frames: str) -> None:
        """Choose where graphs come from (see the module docstring) and switch it on."""
        # The graphs' source file:line metadata needs IR debug while ops are traced
        # (SourceFrames switches it) and XLA_HLO_DEBUG when graphs are lowered (read at the
        # first lowering).
        os.environ.setdefault("XLA_HLO_DEBUG", "1")
        self.frames = SourceFrames(xlac, source_frames)
        if not self.frames.available and os.environ.get("XLA_IR_DEBUG") != "1":
            self.warn(
                "graphs have no source lines: this torch_xla cannot switch IR debug at run "
                "time; set XLA_IR_DEBUG=1 before importing torch_xla (xlaprof run does)"
            )
        if os.environ.get("XLA_HLO_DEBUG") != "1":
            self.warn("graphs have no source lines: XLA_HLO_DEBUG is not 1")
        started = runtime_started(xlac)
        flags = os.environ.get("XLA_FLAGS", "")
        users = user_dump(flags, os.getcwd())
        dumped = _DUMP["folder"]
        if started and dumped is not None:  # an earlier session's dump stays in force
            folder, owned = dumped
            self.harvester = GraphHarvester(self.directory, folder, owned=owned)
        elif isinstance(users, Path):
            self.harvester = GraphHarvester(self.directory, users, owned=False)
            if not started:
                if needs_text_flag(flags):
                    os.environ["XLA_FLAGS"] = f"{flags} --xla_dump_hlo_as_text"
                    self.warn(
                        "added --xla_dump_hlo_as_text to XLA_FLAGS: graphs are read as text "
                        f"from your dump folder {users} (copied, never moved)"
                    )
                _DUMP["folder"] = (users, False)
        elif users is None and not started:
            harvester = GraphHarvester(self.directory)
            os.environ["XLA_FLAGS"] = harvester.xla_flags(flags)
            assert harvester.dump is not None
            _DUMP["folder"] = (harvester.dump, True)
            self.harvester = harvester
        else:
            self._start_live(xlac, users)

    def _start_live(self, xlac: Any, users: str | Path | None) -> None:
        """Take graphs from the live tensors: XLA's dump cannot be switched on any more."""
        if isinstance(users, str):
            why = f"your XLA_FLAGS --xla_dump_to={users} names no folder xlaprof can read"
        else:
            why = (
                "torch_xla's runtime was started before profiling (torch_xla.device(), or a "
                "tensor or model moved to the device, before profile()), and XLA reads "
                "XLA_FLAGS only then, so its HLO dump cannot be switched on"
            )
        if not all(hasattr(xlac, n) for n in ("_get_xla_tensors_hlo", "_get_graph_hash")):
            self.warn_loud(
                f"graphs not captured: {why}, and this torch_xla cannot lower live tensors to "
                f"HLO: {WITHOUT_GRAPHS} (enter profile() before torch_xla.device(), or use "
                "xlaprof run)"
            )
            return
        metrics = self.metrics
        self.harvester = GraphHarvester(self.directory, None, owned=False)
        self.live = LiveGraphs(xlac, self.harvester, lambda: metrics.metric("CompileTime")[0])
        self.warn(
            f"graphs taken from the live tensors at each torch_xla.sync(): {why}. They are "
            "taken through warm-up and at the step after each compile; a graph compiled "
            "otherwise (a single late recompile, or outside a sync: a "
            ".item() mid-step, torch.compile) is not (enter profile() before "
            "torch_xla.device(), or use xlaprof run, to keep every graph)"
        )

    @property
    def source(self) -> str | None:
        """Where this run's graphs come from (run.json ``graph_source``)."""
        if self.harvester is None:
            return None
        if self.live is not None:
            return "live"
        return "dump" if self.harvester.owned else "user_dump"

    def before_sync(self, entered_cpu: float) -> float:
        """Called by the sync hook before a sync while graphs come from the live tensors
        (``live`` is set); returns the thread's CPU clock after it. Its time is xlaprof's, not
        the step's: it is taken out of the step's wall and CPU time (``take_cost``) and
        counted in run.json."""
        assert self.live is not None
        start = time.perf_counter()
        self.live.before()
        cpu = time.thread_time()
        self.cost[0] += time.perf_counter() - start
        self.cost[1] += cpu - entered_cpu
        return cpu

    def after_sync(self, step: int) -> None:
        """Called by the sync hook after a sync, while graphs come from the live tensors."""
        assert self.live is not None
        start, cpu = time.perf_counter(), time.thread_time()
        self.live.after(step, None if self.frames is None else self.frames.on)
        spent = time.thread_time() - cpu
        self.cost[0] += time.perf_counter() - start
        self.cost[1] += spent
        self.cost[2] += spent

    def take_cost(self) -> tuple[float, float, float]:
        """Live capture's wall, CPU and in-sync CPU seconds in the step just ended (reset)."""
        wall, cpu, in_sync = self.cost
        if wall:
            self.cost = [0.0, 0.0, 0.0]
            self.cost_total += wall
        return wall, cpu, in_sync

    def step_ended(self, step: int, compiles: int) -> None:
        """At a step boundary: IR debug switched for the next step, graphs collected."""
        if self.frames is not None:
            frames_on = self.frames.step(compiles)
            if self.harvester is not None:
                self.harvester.frames_on = frames_on
        if self.live is not None:
            self.live.step(compiles)
        if compiles and self.harvester is not None:
            self.harvester.collect(step)

    def check(self) -> None:
        """Say in run.json, and aloud, when compiled graphs were not captured."""
        if self.harvester is None:
            return
        live = self.live
        if live is not None and self.cost_total:
            self.warn(
                f"taking graphs from the live tensors took {self.cost_total:.2f} s in all, "
                "left out of the steps' wall and CPU times"
            )
        compiled = self.metrics.metric("CompileTime")[0] - self.compiles_at_start
        if compiled <= 0:
            return
        recorded = self.harvester.recorded
        if recorded == 0:
            reason = ""
            if live is not None and live.error:
                reason = f" (taking them from the live tensors failed: {live.error})"
            elif live is None:
                reason = f" (the dump folder {self.harvester.dump} held none)"
            self.warn_loud(
                f"{compiled} graph(s) compiled during this run but none was captured{reason}: "
                f"{WITHOUT_GRAPHS}"
            )
        elif live is not None and (recorded < compiled or live.error):
            self.warn_loud(
                f"{compiled - recorded} of {compiled} compiled graphs not captured "
                f"({_live_cause(live, compiled - recorded)}): recompilations among them get "
                "no 'what changed'"
            )


def _live_cause(live: LiveGraphs, missed: int) -> str:
    """Why live capture missed ``missed`` compiled graphs, as far as it knows."""
    if live.error:
        return f"capture failed: {live.error}"
    causes = []
    if live.unseen:
        causes.append(
            f"{live.unseen} compiled at a sync whose tensors xlaprof can reach made a graph "
            "already taken: it differed only in tensors that torch holds in C++ alone (a "
            "view's base, autograd's saved tensors)"
        )
    if missed > live.unseen:
        causes.append(
            "compiled outside a torch_xla.sync() (a .item(), print(tensor) or torch.compile "
            "mid-step), or after warm-up while capture was off"
        )
    return "; ".join(causes)


def runtime_started(xlac: Any) -> bool:
    """Whether torch_xla's runtime client exists (XLA has read XLA_FLAGS); False if unknown."""
    check = getattr(xlac, "_xla_runtime_is_initialized", None)
    try:
        return bool(check()) if check is not None else False
    except Exception:
        return False
