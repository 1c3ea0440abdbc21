"""Host syncs (``xlaprof.analyzers.host_sync``): a read of a device value each step, at the
line that reads it."""

from __future__ import annotations

import pytest
from helpers import findings_for, line_of

from xlaprof.findings import Kind, Severity


@pytest.mark.parametrize("with_tracker", [True, False])
def test_item_each_step_is_a_host_sync_at_the_item_line(samples, with_tracker: bool) -> None:
    paths = [samples / "host_sync_item.log"]
    if with_tracker:
        paths.append(samples / "host_sync_item.fallbacks")
    findings = findings_for(*paths)
    assert [f.kind for f in findings] == [Kind.HOST_SYNC]
    assert findings[0].location.line == line_of("host_sync_item", "history.append(loss.item())")
    assert findings[0].evidence["reads_at_site"] >= 12
    assert findings[0].severity == Severity.WARNING
