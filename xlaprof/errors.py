"""The error hierarchy: every user-facing failure is one of these.

The CLI catches ``XlaprofError`` and prints ``xlaprof: error: <message>`` on one line, exiting
with the class's ``exit_code``. Each kind of failure has its own code so scripts can tell a
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
