"""A JSON document read as a stream: its top-level keys whole, one array's items one at a time.

Chrome and Kineto traces are one JSON object whose ``traceEvents`` array holds every event:
hundreds of megabytes of text for ten million events, several gigabytes as Python objects when
``json.loads`` parses it whole. ``JsonStream`` reads the text a chunk at a time and hands that
array's items over one by one, each parsed by the standard library's C scanner
(``json.JSONDecoder.raw_decode``), so memory holds one chunk of text and what the caller keeps
of each item, never the document.

The grammar is JSON's (``json.loads``' dialect: ``NaN`` and ``Infinity`` are accepted); what
``json.loads`` rejects raises ``json.JSONDecodeError`` here too (positions are within the text
held, not the file), and nesting past the interpreter's recursion limit ``RecursionError``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

from xlaprof.parse.units import DECODER

_WHITESPACE = " \t\n\r"
# A value that does not parse is read on (its end may be in the next chunk) up to this many
# characters of text; past that it is malformed, not cut.
MAX_ITEM_CHARS = 64 * 1024**2
# A value ending this close to the end of the text held is parsed again with more text after it:
# a number cut by a chunk's end ("-1." of "-1.5e3") is itself a valid number.
_LOOKAHEAD = 64
# The least text read on before a value that did not parse is parsed again.
_MIN_READ_ON = 4096


class JsonStream:
    """The JSON text ``chunks`` yields (``str`` pieces, in order), read left to right."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self.chunks = chunks
        self.text = ""
        self.at = 0
        self.done = False
        self.found = False  # whether the streamed array was there (``document``)

    def _more(self, wanted: int = 1) -> bool:
        """Append at least ``wanted`` more characters (fewer at the end of the text), dropping
        what was read; False if there was nothing more.

        The pieces are joined once: appending a tiny chunk at a time to a long item held would
        copy the item again for each chunk (a trace cut into thousands of tiny gzip members).
        """
        pieces = [self.text[self.at :]]
        got = 0
        for chunk in self.chunks:
            if chunk:
                pieces.append(chunk)
                got += len(chunk)
                if got >= wanted:
                    break
        else:
            self.done = True
        if not got:
            return False
        self.text = "".join(pieces)
        self.at = 0
        return True

    def _error(self, message: str) -> json.JSONDecodeError:
        return json.JSONDecodeError(message, self.text, self.at)

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end of the text)."""
        while True:
            text, at = self.text, self.at
            while at < len(text) and text[at] in _WHITESPACE:
                at += 1
            self.at = at
            if at < len(text):
                return text[at]
            if not self._more():
                return ""

    def expect(self, char: str, what: str) -> None:
        if self.peek() != char:
            raise self._error(f"Expecting {what}")
        self.at += 1

    def value(self) -> Any:
        """The next JSON value, whole."""
        if self.peek() == "":
            raise self._error("Expecting value")
        while True:
            try:
                value, end = DECODER.raw_decode(self.text, self.at)
            except json.JSONDecodeError:
                # Cut by the chunk's end, or malformed: read on, up to MAX_ITEM_CHARS. The text
                # held at least doubles before the item is parsed again from its start, so an
                # item arriving in many small pieces is parsed a logarithmic number of times,
                # not once per piece (which was quadratic in the item's length).
                held = len(self.text) - self.at
                if held > MAX_ITEM_CHARS or not self._more(max(held, _MIN_READ_ON)):
                    raise
                continue
            if end > len(self.text) - _LOOKAHEAD and not self.done and self._more(_LOOKAHEAD):
                continue  # a number may go on in the next chunk ("-1." + "5e3")
            self.at = end
            return value

    def items(self, handle: Callable[[Any], None]) -> None:
        """Each item of the array that starts here, to ``handle``, one at a time."""
        self.expect("[", "'['")
        if self.peek() == "]":
            self.at += 1
            return
        while True:
            handle(self.value())
            char = self.peek()
            self.at += 1
            if char == "]":
                return
            if char != ",":
                self.at -= 1
                raise self._error("Expecting ',' delimiter")

    def document(self, streamed: str, handle: Callable[[Any], None]) -> dict[str, Any] | None:
        """Read the whole document: an object's keys whole (returned) except ``streamed``, whose
        array's items go to ``handle``; a document that is an array has its items go to
        ``handle`` (None is returned). Anything after the document raises "Extra data".
        ``found`` then says whether the array was there: a ``streamed`` key whose value is not
        an array is returned with the others."""
        others: dict[str, Any] | None = None
        char = self.peek()
        if char == "\ufeff":
            raise self._error("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        if char == "[":
            self.items(handle)
            self.found = True
        elif char == "{":
            others = self._object(streamed, handle)
        else:
            self.value()  # a scalar document: parsed (or rejected) as json.loads would
        if self.peek() != "":
            raise self._error("Extra data")
        return others

    def _object(self, streamed: str, handle: Callable[[Any], None]) -> dict[str, Any]:
        others: dict[str, Any] = {}
        self.expect("{", "'{'")
        if self.peek() == "}":
            self.at += 1
            return others
        while True:
            if self.peek() != '"':
                raise self._error("Expecting property name enclosed in double quotes")
            key = self.value()
            self.expect(":", "':' delimiter")
            if key == streamed and self.peek() == "[":
                self.items(handle)
                self.found = True
                others.pop(key, None)
            else:
                others[key] = self.value()
            char = self.peek()
            self.at += 1
            if char == "}":
                return others
            if char != ",":
                self.at -= 1
                raise self._error("Expecting ',' delimiter")
