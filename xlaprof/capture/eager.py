"""Where the script turned torch_xla's eager mode on: the line the ``eager_mode`` finding names.

``torch_xla.experimental.eager_mode(True)`` and ``eager_mode_context(True)`` both call
``torch_xla._XLAC._set_use_eager_mode``; a session wraps that function while it records and
keeps the first call that turns eager mode on from outside torch_xla (``torch_xla.compile``
turns it off and back on around each compiled call: those are not the user's). A script that
turned it on before the session started has no site recorded; the analysis then reads the
script's source.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_EAGER_FILE = os.path.join("torch_xla", "experimental", "eager.py")
_TORCH_XLA_DIR = f"{os.sep}torch_xla{os.sep}"


class EagerSite:
    """Records the first ``file:line`` outside torch_xla that turned eager mode on."""

    def __init__(self, xlac: Any) -> None:
        self.xlac = xlac
        self.site: str | None = None
        self._original: Any = None

    def start(self) -> None:
        original = getattr(self.xlac, "_set_use_eager_mode", None)
        if original is None or getattr(original, "_xlaprof_eager", False):
            return

        def set_use_eager_mode(enable: bool, *args: Any, **kwargs: Any) -> Any:
            if enable and self.site is None:
                self.site = _caller_site(sys._getframe(1))
            return original(enable, *args, **kwargs)

        set_use_eager_mode._xlaprof_eager = True  # type: ignore[attr-defined]
        try:
            self.xlac._set_use_eager_mode = set_use_eager_mode
        except (AttributeError, TypeError):  # a module that refuses new attributes
            return
        self._original = original

    def stop(self) -> None:
        if self._original is not None:
            self.xlac._set_use_eager_mode = self._original
            self._original = None


def _caller_site(frame: Any) -> str | None:
    """The caller past torch_xla's eager helpers; None when torch_xla itself made the call."""
    while frame is not None and frame.f_code.co_filename.endswith(_EAGER_FILE):
        frame = frame.f_back
    if frame is None or _TORCH_XLA_DIR in frame.f_code.co_filename:
        return None
    return f"{frame.f_code.co_filename}:{frame.f_lineno}"
