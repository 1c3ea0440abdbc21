"""The words the reports say the step model's bounds and parts in (the console's story, the
HTML's): the analysis names them by key (``StepStory.bound``, ``StepStory.parts``), the
reports say them."""

from __future__ import annotations

from xlaprof.model.result import UNATTRIBUTED

# Plain words for each bound.
BOUND_WORDS = {
    "compile": "compiling",
    "tracing": "host work (Python, lazy tracing, graph build): tracing-bound",
    "input": "waiting for input data",
    "transfer": "host-device transfers and reads (sync-bound)",
    "device": "device work: device-bound",
    "host": "other host work (the device idle)",
    "cpu_wait": "waiting for a CPU: the cores were busy (other threads or processes had them)",
}
# The parts of a step's wall time (``with_bounds``' part columns), in words.
PART_WORDS = {
    "compile": "compiling",
    "tracing": "host CPU (Python + tracing)",
    "transfer": "transfers",
    "device": "device work",
    "cpu_wait": "waiting for a CPU (a busy machine)",
    UNATTRIBUTED: "unattributed",
}
