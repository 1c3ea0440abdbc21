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


# Trace properties plotly shows as labels, and where data goes in this project's figures.
_TRACE_KEYS = ("x", "y", "text", "hovertext", "name", "labels", "ids", "customdata")


def _labels(value: Any) -> Any:
    if isinstance(value, str):
        return plotly_label(value)
    if isinstance(value, list | tuple):
        return [_labels(v) for v in value]
    if hasattr(value, "dtype") and hasattr(value, "tolist") and value.dtype == object:
        return [_labels(v) for v in value.tolist()]
    return value


def plotly_figure(figure: Any) -> Any:
    """``figure`` with every data string its traces show made inert (``plotly_label``),
    and its titles too; templates (``hovertemplate``, ours) are left as they are."""
    for trace in figure.data:
        for key in _TRACE_KEYS:
            value = getattr(trace, key, None)
            if value is not None:
                trace[key] = _labels(value)
    layout = figure.layout
    if layout.title.text:
        layout.title.text = plotly_label(layout.title.text)
    axes = [name for name in layout.to_plotly_json() if name.startswith(("xaxis", "yaxis"))]
    for name in axes:
        axis = layout[name]
        if axis.title.text:
            axis.title.text = plotly_label(axis.title.text)
        for key in ("categoryarray", "ticktext"):
            if axis[key] is not None:
                axis[key] = _labels(axis[key])
    return figure


def safe_console(**options: Any) -> Console:
    """A rich ``Console`` for output that holds data: markup off, controls visible.

    Markup is never read (styles of xlaprof's own text are ``Text`` styles), so an op named
    ``[link=...]`` or ``[/oops]`` prints as itself; every segment of text is passed through
    ``terminal`` after layout, so no control sequence from data reaches the terminal (rich's
    own styling is emitted apart from the text and is untouched).
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
    return _SafeConsole(**options)
