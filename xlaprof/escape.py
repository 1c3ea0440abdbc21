"""One escaping function per medium, for every string that came from someone else's files.

Host names, device kinds, op and region names, file paths, warnings: all come from captures and
run directories a user may have been sent. Printed as they are, they can drive the terminal
(OSC 0 retitles it, OSC 8 makes hyperlinks, erase-line and conceal hide lines), become rich
markup (``[link=https://...]``, or ``[/oops]``, which crashes the renderer), break a GitHub
workflow command or a JUnit XML file, or become live plotly label markup (``<a href=...>``) in
the HTML report. So each medium has one function here, and every renderer passes data
through it:

* ``terminal``: control characters (C0, DEL, C1) and invisible direction/format characters
  shown visibly, as ``\\x1b`` or ``\\u202e``; ``safe_console`` is a rich console that does that
  to every line it prints and never reads markup (styles are given as ``Text`` styles);
* ``no_commands``: text output (every line xlaprof prints for people) in which no line can be
  read as a GitHub workflow command (``::error``, ``::stop-commands::``): a line that starts
  with ``::`` (after white space, which the runner trims) shows its first ``:`` as ``\\x3a``;
  ``safe_console`` applies it to every line it prints;
* ``github_data``/``github_property``: a workflow command's message and its properties;
* ``xml_text``: text and attributes of XML 1.0 (JUnit): always well-formed;
* ``html_text``: HTML text and attributes;
* ``plotly_label``/``plotly_figure``: strings plotly renders as labels (its own small HTML:
  ``<a>``, ``<b>``, ``<br>``, entities) shown literally.
"""

from __future__ import annotations

import html
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

# Invisible characters that reorder or hide text (Trojan Source, CVE-2021-42574) or join it.
_FORMAT = [0x061C, 0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x2028, 0x2029, 0xFEFF]
_FORMAT += [*range(0x202A, 0x202F), *range(0x2066, 0x206A)]
_CONTROLS = [*range(0x00, 0x20), 0x7F, *range(0x80, 0xA0), *_FORMAT]


def _visible(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_TABLE = {code: _visible(code) for code in _CONTROLS if code != 0x09}
_TABLE_LINES = {code: text for code, text in _TABLE.items() if code != 0x0A}
# Characters XML 1.0 does not allow at all, beyond the controls above (lone surrogates,
# U+FFFE and U+FFFF).
_NOT_XML = re.compile("[\ud800-\udfff\ufffe\uffff]")


def terminal(text: object, newlines: bool = False) -> str:
    """``text`` with every control and invisible format character shown as ``\\xNN``.

    Tabs stay; newlines stay only with ``newlines=True`` (a multi-line message), so one line
    of data is always one line on the screen.
    """
    return str(text).translate(_TABLE_LINES if newlines else _TABLE)


def no_commands(text: str) -> str:
    """``text`` with no line a GitHub runner reads as a workflow command.

    The runner (actions/runner, ``ActionCommand.TryParseV2``) trims a line's leading white
    space and takes it as a command when it then starts with ``::``. Only xlaprof's own
    annotations (``report.ci.github_annotations``) may start so; any other line that would is
    shown with its first ``:`` as ``\\x3a``, as ``terminal`` shows characters it escapes.
    """
    if "::" not in text:
        return text
    return "".join(_no_command(line) for line in text.splitlines(keepends=True))


def _no_command(line: str) -> str:
    body = line.lstrip()
    if not body.startswith("::"):
        return line
    return line[: len(line) - len(body)] + "\\x3a" + body[1:]


class _CommandGuard:
    """A text stream that writes through ``no_commands``, a line at a time."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._line = ""

    def write(self, text: str) -> int:
        lines = (self._line + text).splitlines(keepends=True)
        self._line = lines.pop() if lines and not lines[-1].endswith(("\n", "\r")) else ""
        if lines:
            self._stream.write(no_commands("".join(lines)))
        return len(text)

    def flush(self) -> None:
        if self._line:
            self._stream.write(no_commands(self._line))
            self._line = ""
        self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding: the stream's own
        return getattr(self._stream, name)


def markup(text: object) -> str:
    """``text`` for a rich markup string: controls visible, ``[`` never opening a tag."""
    from rich.markup import escape

    return escape(terminal(text))


def github_data(text: object) -> str:
    """A GitHub workflow command's message: controls visible, then the runner's escapes.

    The runner undoes ``%25``, ``%0D`` and ``%0A`` (actions/toolkit, command.ts); a raw
    newline would end the command and start another.
    """
    shown = terminal(text, newlines=True)
    return shown.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def github_property(text: object) -> str:
    """A workflow command's property value (``file=``, ``title=``): also ``:`` and ``,``."""
    return github_data(text).replace(":", "%3A").replace(",", "%2C")


def xml_text(text: object, newlines: bool = True) -> str:
    """Text for XML 1.0: every character it forbids (and ESC, C1, DEL) shown visibly.

    The XML serializer still escapes ``<``, ``&`` and quotes; this makes the rest legal.
    """
    shown = terminal(text, newlines=newlines)
    return _NOT_XML.sub(lambda m: f"\\u{ord(m.group()):04x}", shown)


def html_text(text: object) -> str:
    """Text or an attribute value in HTML: controls visible, then ``html.escape``."""
    return html.escape(terminal(text, newlines=True))


def plotly_label(text: object) -> str:
    """A string plotly shows as a label (tick, hover, legend, text): its markup inert.

    plotly reads ``<a href>``, ``<b>``, ``<br>``, ``<span style>`` and entities in labels;
    with ``<``, ``>`` and ``&`` as entities it shows them as the characters they are.
    """
    return html.escape(terminal(text), quote=False)


def _labels(value: Any) -> Any:
    if isinstance(value, str):
        return plotly_label(value)
    if isinstance(value, list | tuple):
        return [_labels(v) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "tolist") and value.dtype.kind in "OUS":
        return [_labels(v) for v in value.tolist()]
    return value


def _inert_properties(value: Any, key: str = "") -> Any:
    """Every string of a figure's properties, at any depth, made inert; templates kept.

    A template (``hovertemplate``, ``texttemplate``: written here, with ``%{...}`` naming the
    data it shows, and that data is escaped) is the only markup a figure keeps; the theme
    (``layout.template``) is plotly's. Everything else a figure holds (trace data, titles,
    annotations, shapes' labels, legends, menus, axis ticks) is escaped however it got there:
    listing the properties that may hold data missed one (the step chart's off-scale note).
    """
    if key == "template" or key.endswith("template"):
        return value
    if isinstance(value, dict) and "bdata" in value and set(value) <= {"bdata", "dtype", "shape"}:
        return _typed_array(value)  # numbers: nothing to escape, kept as the array they were
    if isinstance(value, dict):
        return {k: _inert_properties(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_inert_properties(v, key) for v in value]
    return _labels(value)


def _typed_array(value: dict[str, Any]) -> Any:
    """A plotly typed array (``{"dtype": "f8", "bdata": base64}``, how ``to_plotly_json``
    writes numeric arrays) as the numpy array it was made from."""
    import base64

    import numpy as np

    array = np.frombuffer(base64.b64decode(value["bdata"]), dtype=value.get("dtype", "f8"))
    shape = value.get("shape")
    if isinstance(shape, str):
        array = array.reshape([int(n) for n in shape.split(",")])
    return array


def plotly_figure(figure: Any) -> Any:
    """``figure`` with every string of every property made inert (``plotly_label``):
    traces, layout, annotations, shapes, menus, at any depth; templates (``hovertemplate``,
    ours) are left as they are.

    Done once per figure: the figures of ``xlaprof.report.figures`` come back inert (so no
    notebook caller can forget), and the HTML report passing them through again changes
    nothing (``&lt;`` is not escaped twice).
    """
    if getattr(figure, "_xlaprof_inert", False):
        return figure
    import plotly.graph_objects as go

    inert = go.Figure(_inert_properties(figure.to_plotly_json()), skip_invalid=False)
    inert._xlaprof_inert = True  # plotly keeps attributes named with "_" off the figure's JSON
    return inert


def safe_console(**options: Any) -> Console:
    """A rich ``Console`` for output that holds data: markup off, controls visible.

    Markup is never read (styles of xlaprof's own text are ``Text`` styles), so an op named
    ``[link=...]`` or ``[/oops]`` prints as itself; every segment of text is passed through
    ``terminal`` after layout, so no control sequence from data reaches the terminal (rich's
    own styling is emitted apart from the text and is untouched); and every line it writes
    goes through ``no_commands``, so no line of data can be a GitHub workflow command.
    """
    from rich.console import Console
    from rich.segment import Segment

    class _SafeConsole(Console):
        def render(self, renderable: Any, options: Any = None) -> Any:
            for segment in super().render(renderable, options):
                if segment.control or not segment.text:
                    yield segment
                else:
                    shown = terminal(segment.text, newlines=True)
                    yield segment if shown == segment.text else Segment(shown, segment.style)

    options.setdefault("highlight", False)
    options.setdefault("markup", False)
    stream = options.get("file")
    if stream is None:
        import sys

        stream = sys.stderr if options.get("stderr") else sys.stdout
    options["file"] = _CommandGuard(stream)
    return _SafeConsole(**options)
