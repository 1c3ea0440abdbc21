"""Parser for torch_xla metrics reports, from the 2019 XRT era to 2.9 PJRT.

Input is whatever text a user has: a clean ``metrics_report()`` dump, or a training log where
report lines carry timestamps, host names and log levels, where tqdm bars or program output are
glued onto them, and where several snapshots follow each other. The parser keys on the report's
field names wherever they stand in a line, so any prefix is ignored, and it never raises: what it
cannot read becomes a ``ParseWarning`` with the line number.

Report boundaries: a ``[MetricsData; step=N]`` header, or a metric/counter name repeating within
the current report (a new snapshot). A full 2.x report has two Metric/Counter sections (lazy core
and XLA runtime), so a Metric after Counters does *not* start a new report.

One line-by-line state machine (``MetricsParser``) reads every report format listed above; its
record types stand beside it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlaprof.parse.units import Unit, parse_leading_quantity, parse_quantity

if TYPE_CHECKING:
    import pandas as pd

_FIELDS = (
    "Metric",
    "Counter",
    "TotalSamples",
    "Accumulator",
    "ValueRate",
    "Rate",
    "Mean",
    "StdDev",
    "Percentiles",
    "Value",
)
# "Rate" must not match inside "ValueRate"; "Value" must not match "ValueRate" (the colon does it).
# No word boundary: program output is glued onto report lines ("loss 0.25Metric: ...").
_FIELD_RE = re.compile(r"(?<!Value)(" + "|".join(_FIELDS) + r"):[ \t]*")
_HEADER_RE = re.compile(r"\[MetricsData;\s*step=(\d+)\]")
_NAME_RE = re.compile(r"[A-Za-z_][\w:./<>\-]*")
# Not from inside a number: a search would start again at each digit of a long one.
_PERCENTILE_RE = re.compile(r"(?<![\d.])([\d.]+)%=(\S+?)(?:;|$)")
# Warnings kept per input (a log of garbage must not make a list as long as itself).
MAX_WARNINGS = 1000
# The counter of ``.item()`` and other reads of a device value on the host: a host sync, not
# an op that falls back to the CPU.
HOST_SYNC_OP = "aten::_local_scalar_dense"
# The value before "/ second"; what comes before the slash is stripped by the reader (a lazy
# body beside ``\s*`` backtracked over a line of spaces: quadratic).
_PER_SECOND_RE = re.compile(r"^((?:[^/]|/(?!\s*second))*)/\s*second")
# A count, and what a count must not be followed by: "1e308" and "1.5" are not counts, while
# "20step 10 done" is a count with program output glued on.
_LEADING_INT_RE = re.compile(r"^\s*(\d+)(?![\d.]|[eE][-+]?\d)")
# Counts torch_xla prints are int64; anything longer is not one.
_MAX_COUNT_DIGITS = 19
# Reports kept per input: the first, the last and evenly spaced ones between (see _Parser.thin).
DEFAULT_MAX_REPORTS = 256


def _leading_int(value: str) -> int:
    """Counts (TotalSamples, counter Value) are integers; glued text may follow them."""
    match = _LEADING_INT_RE.match(value)
    if not match:
        raise ValueError(f"not a count: {value[:40]!r}")
    digits = match.group(1)
    if len(digits.lstrip("0")) > _MAX_COUNT_DIGITS:
        raise ValueError(f"count out of range: {digits[:40]}")
    return int(digits)


@dataclass(frozen=True)
class ParseWarning:
    """Something in the input that looked like report text but could not be read."""

    line: int
    text: str
    reason: str


@dataclass
class Metric:
    """One ``Metric:`` block. Values are in base units given by ``unit``."""

    name: str
    total_samples: int | None = None
    accumulator: float | None = None
    unit: Unit = ""
    value_rate: float | None = None
    rate: float | None = None
    mean: float | None = None
    stddev: float | None = None
    percentiles: dict[float, float] = field(default_factory=dict)
    line: int = 0


@dataclass
class MetricsReport:
    """One report (or snapshot), metrics and counters in the order they were printed."""

    metrics: dict[str, Metric] = field(default_factory=dict)
    counters: dict[str, int | None] = field(default_factory=dict)
    step: int | None = None
    first_line: int = 0
    last_line: int = 0

    def metric_samples(self, *names: str) -> int | None:
        """TotalSamples of the first of ``names`` present (names differ across eras)."""
        for name in names:
            metric = self.metrics.get(name)
            if metric is not None and metric.total_samples is not None:
                return metric.total_samples
        return None

    def metric_total(self, *names: str) -> float | None:
        """Accumulator of the first of ``names`` present, in base units."""
        for name in names:
            metric = self.metrics.get(name)
            if metric is not None and metric.accumulator is not None:
                return metric.accumulator
        return None

    def counter(self, name: str) -> int | None:
        return self.counters.get(name)

    def aten_counters(self) -> dict[str, int | None]:
        """``aten::`` counters: ops torch_xla ran on the CPU instead of lowering them."""
        return {k: v for k, v in self.counters.items() if k.startswith("aten::")}


@dataclass
class MetricsParseResult:
    """Every report found in one text, plus what could not be read."""

    reports: list[MetricsReport]
    warnings: list[ParseWarning]
    # How many reports the input held; more than ``len(reports)`` when some were thinned out.
    reports_seen: int = 0

    def to_frame(self) -> pd.DataFrame:
        """One row per metric or counter per report (long format)."""
        import pandas as pd

        rows = []
        for index, report in enumerate(self.reports):
            for metric in report.metrics.values():
                rows.append(
                    {
                        "report": index,
                        "step": report.step,
                        "kind": "metric",
                        "name": metric.name,
                        "total_samples": metric.total_samples,
                        "value": metric.accumulator,
                        "unit": metric.unit,
                        "rate": metric.rate,
                        "p50": metric.percentiles.get(50.0),
                        "p99": metric.percentiles.get(99.0),
                    }
                )
            for name, value in report.counters.items():
                rows.append(
                    {
                        "report": index,
                        "step": report.step,
                        "kind": "counter",
                        "name": name,
                        "total_samples": None,
                        "value": None if value is None else float(value),
                        "unit": "",
                        "rate": None,
                        "p50": None,
                        "p99": None,
                    }
                )
        frame = pd.DataFrame(
            rows,
            columns=[
                "report",
                "step",
                "kind",
                "name",
                "total_samples",
                "value",
                "unit",
                "rate",
                "p50",
                "p99",
            ],
        )
        frame["total_samples"] = frame["total_samples"].astype("Int64")
        frame["step"] = frame["step"].astype("Int64")
        for column in ("kind", "name", "unit"):
            frame[column] = frame[column].astype("category")
        return frame


class MetricsParser:
    """Line-oriented state machine; one instance per input, fed one line at a time.

    Memory is bounded by ``max_reports`` reports, not by the input: a log of 100,000 snapshots
    keeps the first, the last and evenly spaced ones between (every value is cumulative, so
    the kept ones still tell the trend), and says so in a warning.
    """

    def __init__(self, max_reports: int = DEFAULT_MAX_REPORTS) -> None:
        self.max_reports = max(max_reports, 3)
        self.reports_seen = 0
        self.reports: list[MetricsReport] = []
        self.warnings: list[ParseWarning] = []
        self.report: MetricsReport | None = None
        self.metric: Metric | None = None
        self.counter: str | None = None
        self.pending_step: int | None = None
        self.warnings_seen = 0

    # -- report and block boundaries -------------------------------------------------------
    def _new_report(self, lineno: int, step: int | None) -> MetricsReport:
        report = MetricsReport(step=step, first_line=lineno, last_line=lineno)
        self.reports.append(report)
        self.reports_seen += 1
        if len(self.reports) > self.max_reports:
            self.thin()
        self.report = report
        self.metric = None
        self.counter = None
        return report

    def _report_for(self, name: str, lineno: int) -> MetricsReport:
        report = self.report
        if report is None or name in report.metrics or name in report.counters:
            report = self._new_report(lineno, self.pending_step)
            self.pending_step = None
        report.last_line = lineno
        return report

    def thin(self) -> None:
        """Drop every other report between the first and the newest (halving what is kept)."""
        middle = self.reports[1:-1]
        self.reports = [self.reports[0], *middle[1::2], self.reports[-1]]

    def warn(self, lineno: int, text: str, reason: str) -> None:
        if len(self.warnings) < MAX_WARNINGS:
            self.warnings.append(ParseWarning(lineno, text.strip()[:160], reason))
        self.warnings_seen += 1

    def finish(self) -> MetricsParseResult:
        """What was read; call once, after the last line."""
        reports = [r for r in self.reports if r.metrics or r.counters]
        warnings = list(self.warnings)
        if self.warnings_seen > len(self.warnings):
            warnings.append(
                ParseWarning(0, "", f"{self.warnings_seen - len(self.warnings)} more warnings")
            )
        if self.reports_seen > len(self.reports):
            warnings.append(
                ParseWarning(
                    0,
                    "",
                    f"{self.reports_seen} metrics reports in the input: {len(reports)} kept "
                    "(the first, the last and evenly spaced ones between)",
                )
            )
        return MetricsParseResult(reports, warnings, reports_seen=self.reports_seen)

    # -- fields ----------------------------------------------------------------------------
    def line(self, lineno: int, text: str) -> None:
        header = _HEADER_RE.search(text)
        if header:
            self.pending_step = int(header.group(1))
            self.report = None
            self.metric = None
            self.counter = None
        matches = list(_FIELD_RE.finditer(text))
        for index, match in enumerate(matches):
            end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
            self.field(lineno, match.group(1), text[match.end() : end], text)

    def field(self, lineno: int, key: str, value: str, text: str) -> None:
        value = value.strip()
        if key == "Metric":
            self.start_metric(lineno, value, text)
        elif key == "Counter":
            self.counter_field(lineno, value, text)
        elif key == "Value":
            self.counter_value(lineno, value, text)
        elif self.metric is None:
            # A metric field outside a Metric block: program output that happens to say
            # "Rate:" or a report whose header line was lost. Only worth a warning when it
            # parses like report data.
            if key in ("TotalSamples", "Accumulator", "Percentiles"):
                self.warn(lineno, text, f"{key} outside a Metric block")
        else:
            self.metric_field(lineno, key, value, text)

    def start_metric(self, lineno: int, value: str, text: str) -> None:
        match = _NAME_RE.match(value)
        if not match:
            self.warn(lineno, text, "Metric without a name")
            self.metric = None
            return
        name = match.group(0)
        report = self._report_for(name, lineno)
        self.metric = Metric(name=name, line=lineno)
        report.metrics[name] = self.metric
        self.counter = None

    def counter_field(self, lineno: int, value: str, text: str) -> None:
        # 2019 format: inside a Metric block, "Counter: <value>" is the accumulator field.
        if self.metric is not None and self.metric.accumulator is None:
            try:
                number, unit, _rest = parse_leading_quantity(value)
            except ValueError:
                pass
            else:
                self.metric.accumulator = number
                self.metric.unit = self.metric.unit or unit
                return
        match = _NAME_RE.match(value)
        if not match:
            self.warn(lineno, text, "Counter without a name")
            return
        name = match.group(0)
        report = self._report_for(name, lineno)
        report.counters[name] = None
        self.counter = name
        self.metric = None

    def counter_value(self, lineno: int, value: str, text: str) -> None:
        if self.counter is None or self.report is None:
            self.warn(lineno, text, "Value outside a Counter block")
            return
        try:
            self.report.counters[self.counter] = _leading_int(value)
        except ValueError:
            self.warn(lineno, text, f"unreadable value for counter {self.counter}")
            return
        self.report.last_line = lineno
        self.counter = None

    def metric_field(self, lineno: int, key: str, value: str, text: str) -> None:
        metric = self.metric
        assert metric is not None
        if self.report is not None:
            self.report.last_line = lineno
        try:
            if key == "TotalSamples":
                metric.total_samples = _leading_int(value)
            elif key == "Accumulator":
                metric.accumulator, unit, _rest = parse_leading_quantity(value)
                metric.unit = unit
            elif key in ("ValueRate", "Rate"):
                per_second = _PER_SECOND_RE.match(value)
                if value == "":
                    return  # Some XRT-era reports print the field with no value.
                number, unit, _rest = parse_leading_quantity(
                    per_second.group(1).rstrip() if per_second else value
                )
                if key == "ValueRate":
                    metric.value_rate = number
                    metric.unit = metric.unit or unit
                else:
                    metric.rate = number
            elif key in ("Mean", "StdDev"):
                number, unit, _rest = parse_leading_quantity(value)
                setattr(metric, "mean" if key == "Mean" else "stddev", number)
                metric.unit = metric.unit or unit
            elif key == "Percentiles":
                self.percentiles(lineno, metric, value, text)
        except ValueError as error:
            self.warn(lineno, text, f"{key} of {metric.name}: {error}")

    def percentiles(self, lineno: int, metric: Metric, value: str, text: str) -> None:
        if not value:
            return  # An empty "Percentiles:" is valid (no samples kept).
        items = [item.strip() for item in value.split(";") if item.strip()]
        for item in items:
            pct, _, raw = item.partition("%=")
            try:
                number, unit = parse_quantity(raw)
                key = float(pct)
            except ValueError:
                self.warn(lineno, text, f"percentile {item!r} of {metric.name} is unreadable")
                continue
            if metric.unit and unit != metric.unit and number == number:  # nan has no unit
                # A truncated line ("5%=01") parses as a bare number: do not trust it.
                self.warn(lineno, text, f"percentile {item!r} of {metric.name} has no unit")
                continue
            metric.percentiles[key] = number
            metric.unit = metric.unit or unit


def parse_metrics_report(
    text: str | Iterable[str], max_reports: int = DEFAULT_MAX_REPORTS
) -> MetricsParseResult:
    """Parse every metrics report in ``text`` (a string or an iterable of lines).

    Lines are split on ``\\n`` only (``str.splitlines`` would also split on form feeds and
    other separators, which shifts line numbers). Never raises on malformed input: unreadable
    report fields become warnings. At most ``max_reports`` reports are kept (see
    ``MetricsParser``).
    """
    lines = text.split("\n") if isinstance(text, str) else text
    parser = MetricsParser(max_reports)
    for lineno, line in enumerate(lines, start=1):
        parser.line(lineno, line.rstrip("\r\n"))
    return parser.finish()
