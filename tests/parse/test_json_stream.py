"""``xlaprof.parse.json_stream``: a document read a chunk at a time reads as ``json.loads``
reads it whole, wherever the chunks are cut (the oracle is the standard library's parser)."""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import HTA, shared_trace

from xlaprof.parse.json_stream import JsonStream

DOCUMENTS = [
    '{"traceEvents": [{"a": 1}, 2, "x", [3, {"b": null}]], "n": 12345, "f": -1.5e3}',
    '  [ {"ts": 10.25, "name": "k\\u00e9\\"r"} , {} ,[], true, NaN ]  ',
    '{"n": 1, "deviceProperties": [{"id": 0}], "traceEvents": [], "z": "t"}',
    '{"traceEvents": {"not": "a list"}}',
    '{"other": 1}',
    "{}",
    "[]",
    "123",
]
BROKEN = ['{"traceEvents": [{"a": 1} {"b": 2}]}', '{"traceEvents": [1, 2', '{"a" 1}', "[1] 2", ""]


def chunks(text: str, size: int) -> Iterator[str]:
    return (text[i : i + size] for i in range(0, len(text), size))


def read(text: str, size: int) -> tuple[list[Any], dict[str, Any] | None, bool]:
    items: list[Any] = []
    stream = JsonStream(chunks(text, size))
    others = stream.document("traceEvents", items.append)
    return items, others, stream.found


def whole(text: str) -> tuple[list[Any], dict[str, Any] | None, bool]:
    """What json.loads makes of the document, in the same shape."""
    document = json.loads(text)
    if isinstance(document, list):
        return document, None, True
    if isinstance(document, dict):
        events = document.get("traceEvents")
        if isinstance(events, list):
            return events, {k: v for k, v in document.items() if k != "traceEvents"}, True
        return [], document, False
    return [], None, False


@pytest.mark.parametrize("text", DOCUMENTS)
@pytest.mark.parametrize("size", [1, 2, 3, 7, 1000])
def test_chunks_cut_anywhere_read_as_json_loads_reads_the_whole(text: str, size: int) -> None:
    items, others, found = read(text, size)
    expected = whole(text)
    assert json.dumps([items, others, found]) == json.dumps(list(expected))


@pytest.mark.parametrize("text", BROKEN)
@pytest.mark.parametrize("size", [1, 5, 1000])
def test_what_json_loads_rejects_is_rejected(text: str, size: int) -> None:
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)
    with pytest.raises(json.JSONDecodeError):
        read(text, size)


def test_a_real_kineto_trace_in_small_chunks() -> None:
    text = gzip.decompress(shared_trace(HTA).read_bytes()).decode()
    items, others, found = read(text, 4093)
    assert found and json.dumps([items, others]) == json.dumps(list(whole(text)[:2]))
