"""The analyzer registry (``xlaprof.analyzers.ANALYZERS``): one entry per finding kind, and
each entry's module, docs page and story answer agree with the rest of the package."""

from __future__ import annotations

import re

from helpers import REPO

from xlaprof.analyzers import ANALYZERS, analyzer_of, answer_of, story_answers
from xlaprof.findings import Kind
from xlaprof.tables.device.bottleneck import BOUNDS


def test_every_kind_has_exactly_one_entry() -> None:
    kinds = [a.kind for a in ANALYZERS]
    assert sorted(kinds) == sorted(Kind) and len(kinds) == len(set(kinds))


def test_each_entry_is_its_kinds_module() -> None:
    for analyzer in ANALYZERS:
        # analyze and unmeasured come from the one module (or package) named after the kind
        assert analyzer.module.__name__ == f"xlaprof.analyzers.{analyzer.kind.value}"
        assert analyzer.unmeasured.__module__ == analyzer.module.__name__


def test_each_kind_has_a_docs_page_that_names_it_and_is_listed() -> None:
    index = (REPO / "docs" / "analyzers" / "README.md").read_text(encoding="utf-8")
    for analyzer in ANALYZERS:
        page = REPO / analyzer.docs
        assert page.is_file(), f"{analyzer.kind.value}: no page at {analyzer.docs}"
        title = page.read_text(encoding="utf-8").splitlines()[0]
        assert re.match(rf"# {analyzer.kind.value} \(`analyzers/", title), title
        assert f"[{analyzer.kind.value}]({page.name})" in index


def test_each_kind_has_a_story_answer_and_every_bound_is_answered() -> None:
    for analyzer in ANALYZERS:
        story = analyzer.story
        assert story.sentence.strip(), f"{analyzer.kind.value}: no story sentence"
        assert set(story.bounds) <= set(BOUNDS), story.bounds
    answers = story_answers()
    # every bound the story can name has a kind that answers it, in one unambiguous order
    assert set(answers) == set(BOUNDS)
    for bound, kinds in answers.items():
        ranks = [analyzer_of(k).story.bounds[bound] for k in kinds]
        assert ranks == sorted(set(ranks)), f"{bound}: two kinds share a rank"
    assert (
        answer_of("tracing", Kind.TRACING_BOUND) == analyzer_of(Kind.TRACING_BOUND).story.sentence
    )
    assert answer_of("device", Kind.TRACING_BOUND) is None
