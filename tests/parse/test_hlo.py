"""The HLO text reader (``xlaprof.parse.hlo``) on damaged modules (issue 48): any text gives
a module (of what could be read) within a bound only a hang reaches; never a crash."""

from __future__ import annotations

import gzip
import random

import hypothesis
from fuzzing import HOSTILE_TEXT, Hang, mutate_text, time_limit
from helpers import SAMPLES
from hypothesis import strategies as st

from xlaprof.parse.hlo import parse_hlo

_MODULE = next(SAMPLES.glob("ci_check/base/*/graphs/*.hlo.txt.gz"))
# Long lines shaped to make a backtracking pattern re-scan them (a 1 MB line took minutes).
_LONG = [
    "  %a = f32[2]{0} " + " " * 100_000 + "add(",
    "  %a = f32[2]{0} add(x), metadata={" + "metadata={ " * 10_000,
    "  %a = f32[2]{0} add(x), metadata={" + 'a=" ' * 20_000 + "}",
    "  %a = f32[2]{0} add(x), metadata={" + "a" * 100_000 + "}",
    "ENTRY %" + "a" * 100_000,
]


@hypothesis.settings(max_examples=40, database=None)
@hypothesis.given(
    seed=st.integers(0, 2**32),
    long_line=st.sampled_from(["", *_LONG]),
    token=st.sampled_from(HOSTILE_TEXT),
)
def test_any_damaged_module_parses_to_what_could_be_read(
    seed: int, long_line: str, token: str
) -> None:
    # GIVEN a real HLO module damaged line by line, with a long adversarial line in its entry
    text = gzip.decompress(_MODULE.read_bytes()).decode()
    lines = mutate_text(random.Random(seed), text).split("\n")
    at = next((i for i, line in enumerate(lines) if line.startswith("ENTRY")), 0) + 1
    lines[at:at] = [long_line, token]
    # WHEN parsed THEN a module, within a bound only a hang reaches
    try:
        with time_limit(60):
            module = parse_hlo("\n".join(lines))
    except Hang as error:  # pragma: no cover - the property's failure
        raise AssertionError(f"seed {seed}: {error}") from None
    assert isinstance(module.name, str)


def _walked_split(text: str) -> list[str]:
    """The comma split as a walk of every character: what ``split_top_level`` is held to."""
    parts, current, depth, quoted = [], "", 0, False
    for index, char in enumerate(text):
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        elif not quoted and char in "({[":
            depth += 1
        elif not quoted and char in ")}]":
            depth -= 1
        elif not quoted and depth == 0 and char == ",":
            parts.append(current.strip())
            current = ""
            continue
        current += char
    return [*parts, current.strip()] if current.strip() else parts


def _walked_closing(text: str, start: int) -> int:
    depth, quoted = 1, False
    for index in range(start, len(text)):
        char = text[index]
        if char == '"' and (index == 0 or text[index - 1] != "\\"):
            quoted = not quoted
        elif quoted:
            continue
        elif char in "({[":
            depth += 1
        elif char in ")}]":
            depth -= 1
            if depth == 0:
                return index
    return len(text)


@hypothesis.given(st.text(alphabet='ab ,"\\(){}[]=', max_size=60), st.integers(0, 60))
@hypothesis.settings(max_examples=300)
def test_the_bracket_walks_are_the_character_walks(text: str, start: int) -> None:
    # GIVEN any text of brackets, quotes, escapes and commas WHEN it is split at top-level commas
    # and its closing bracket is found THEN both agree with a walk of every character
    from xlaprof.parse.hlo import closing_bracket, split_top_level

    assert split_top_level(text) == _walked_split(text)
    start = min(start, len(text))
    assert closing_bracket(text, start) == _walked_closing(text, start)
