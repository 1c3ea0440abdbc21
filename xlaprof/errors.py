"""The error hierarchy: every user-facing failure is one of these.

Every error class lives here, with its exit code (docs/json-format.md lists them). The CLI
catches ``XlaprofError`` and prints ``xlaprof: error: <message>`` on one line, exiting with the
class's ``exit_code``. Each kind of failure has its own code so scripts can tell a
missing file from a file that is not a report. Click's own usage errors keep exit code 2.
"""

from __future__ import annotations


class XlaprofError(Exception):
    """Base class: a failure the user can act on, shown as one line."""

    exit_code = 1


class InputNotFound(XlaprofError):
    """A path given on the command line does not exist."""

    exit_code = 3


class InputUnreadable(XlaprofError):
    """A path exists but cannot be read (permissions, a directory where a file was expected)."""

    exit_code = 4


class InputEmpty(XlaprofError):
    """A file holds no bytes (or only white space)."""

    exit_code = 5


class InputNotText(XlaprofError):
    """A file is binary: neither a metrics report nor a debug log."""

    exit_code = 6


class InputNotRecognized(XlaprofError):
    """A text file that holds no metrics report and no PT_XLA_DEBUG analysis."""

    exit_code = 7


class SavedDocumentInvalid(InputNotRecognized):
    """A saved ``--json`` document that its schema refuses (nesting, sizes, a cell or column
    type, an impossible figure): read as nothing else, and never reaching a renderer."""

    exit_code = 29


class InputTooLarge(XlaprofError):
    """A file is over the size limit (``--max-size``)."""

    exit_code = 8


class RunDirError(XlaprofError):
    """A run directory is missing its run.json, or was written by a newer schema."""

    exit_code = 9


class RuntimeUnavailable(XlaprofError):
    """A capture path needs torch_xla, which cannot be imported here."""

    exit_code = 10


class OutputError(XlaprofError):
    """An output file cannot be written, or exists and --force was not given."""

    exit_code = 11


class CaptureError(XlaprofError):
    """A capture failed for a reason other than the ones below."""

    exit_code = 13


class NothingListening(CaptureError):
    """No profiler server answers at an address."""

    exit_code = 14


class CaptureEmpty(CaptureError):
    """The server answered but the capture holds no events."""

    exit_code = 15


class CapturePartial(CaptureError):
    """Some hosts of a capture were captured, others not: the good hosts' traces are kept."""

    exit_code = 27


class PortBusy(XlaprofError):
    """The port for the UI is taken."""

    exit_code = 16


class TargetError(XlaprofError):
    """A bench TARGET cannot be loaded or does not give a model."""

    exit_code = 17


class NumericsMismatch(XlaprofError):
    """Before and after disagree: the fix changes what the model computes."""

    exit_code = 18


class FixFailed(XlaprofError):
    """A variant could not run (the fix does not apply to this model)."""

    exit_code = 19


class OffloadNotMeasured(XlaprofError):
    """The backend supports host offload, but xlaprof cannot apply it automatically yet."""

    exit_code = 20


class BudgetError(XlaprofError):
    """``xlaprof check``: a budget is invalid (an unknown key, a wrong type, no baseline)."""

    exit_code = 21


class BadCapture(XlaprofError):
    """A trace file is truncated, corrupt, empty or not a profiler capture at all."""

    exit_code = 23


class UnsafeInput(XlaprofError):
    """An input holds names that would make xlaprof, or a tool it starts, write or read outside
    it (an HLO module named ``../../x`` for ``xlaprof view``)."""

    exit_code = 24


class OutsideRoots(UnsafeInput):
    """``xlaprof mcp``: a path outside the folders the server was allowed to read (``--root``),
    or a folder holding a link that leads out of them."""


class SchedulerError(XlaprofError):
    """``--scheduler``: not a dask scheduler address, none answers in time, or it has no
    workers."""

    exit_code = 25


class ExtraMissing(XlaprofError):
    """A command needs an optional extra that is not installed (``xlaprof mcp``: the MCP SDK,
    ``pip install 'xlaprof[mcp]'``)."""

    exit_code = 26


class ServerBusy(XlaprofError):
    """``xlaprof mcp``: another tool call has held the server longer than a call waits for it
    (``BUSY_WAIT_SECONDS``); try again, or start the server again."""

    exit_code = 28


class CommandNotFound(XlaprofError):
    """The command after ``--`` of ``xlaprof run`` could not be started."""

    exit_code = 127
