"""dynamo.jsonl rows -> typed records (``xlaprof.parse.dynamo_log``).

The rows are dynamo's own messages (tests/data/dynamo.jsonl, described in tests/data/README.md).
"""

from __future__ import annotations

from helpers import dynamo_rows

from xlaprof.parse.dynamo_log import SizeMismatch, parse_dynamo_records

FILE = "/home/user/train.py"  # the script dynamo's messages in tests/data/dynamo.jsonl name
ROWS = dynamo_rows()


def test_records_are_read_from_dynamos_messages() -> None:
    records = parse_dynamo_records(ROWS)
    kinds = ["compile", "graph_break", "recompile"]
    assert [r.kind for r in records] == [*kinds, *kinds, "compile"]
    first = records[2]
    assert (first.function, first.code, first.step) == ("fwd", f"{FILE}:28", 1)
    assert first.mismatch == SizeMismatch("x", 0, 16, 12)
    second = records[5]
    # the newest cache entry's failure comes first: what changed since the last compile
    assert second.reason == "tensor 'x' size mismatch at index 0. expected 12, actual 9"
    assert first.cause == second.cause == "tensor 'x' size mismatch at index 0"
    assert records[1].code == f"{FILE}:30" and records[1].reason == "Data-dependent branching"
    assert records[4].code == f"{FILE}:30"
