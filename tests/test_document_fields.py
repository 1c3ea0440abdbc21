"""The saved document's schema (``xlaprof.model.document``) names every field of the result's
values it carries, and no other: a field added to one and not the other would make every
``--json`` document fail its own schema on reading back (a story's new field once did)."""

from __future__ import annotations

import dataclasses

import pytest

from xlaprof.model import document, result

PAIRS = [
    (result.StepStory, document.StoryDoc),
    (result.DeviceView, document.DeviceViewDoc),
    (result.HostView, document.HostViewDoc),
    (result.CompileSummary, document.CompileSummaryDoc),
    (result.KeptRows, document.KeptRowsDoc),
    (result.CheckFigures, document.CheckDoc),
    (result.Counts, document.CountsDoc),
    (result.StepCount, document.StepCountDoc),
    (result.SteadyStep, document.SteadyDoc),
    (result.TracedSteps, document.TracedStepsDoc),
]
# A value field written as other keys: an older document's device notes (``written``), as the
# text keys it held them under.
WRITTEN_AS = {result.DeviceView: ("written", set(result.DEVICE_WORDS))}


@pytest.mark.parametrize(("value", "schema"), PAIRS, ids=[v.__name__ for v, _ in PAIRS])
def test_each_result_value_and_its_schema_name_the_same_fields(value: type, schema: type) -> None:
    fields = {f.name for f in dataclasses.fields(value)}
    if value in WRITTEN_AS:
        field, keys = WRITTEN_AS[value]
        fields = (fields - {field}) | keys
    named = set(schema.model_fields)  # type: ignore[attr-defined]
    assert fields - named == set(), f"{value.__name__} fields the schema lacks"
    assert named - fields == set(), f"{schema.__name__} fields the value lacks"


def test_a_story_with_every_field_set_reads_back() -> None:
    # GIVEN a story whose every optional figure is set (none left at its default)
    story = result.StepStory(steps=3, warmup_steps=1, steady_steps=2, median_wall_s=0.010)
    for field in dataclasses.fields(story):
        if getattr(story, field.name) is None and field.name.endswith("_s"):
            setattr(story, field.name, 0.001)
    story.parts = {"device": 0.006, "unattributed": 0.004}
    # THEN its document passes the schema and gives the same story back
    doc = document.StoryDoc.model_validate(story.to_json())
    assert result.StepStory.from_json(doc.model_dump()) == story


def test_the_schema_requires_every_timeline_column_the_console_reads() -> None:
    # GIVEN the step timeline's columns the console prints (and its step and "from" cells),
    # kept in report/ where the model may not import them
    from xlaprof.report import console

    printed = {"step", "source", *(key for key, _ in console.TIMELINE_COLUMNS)}
    # THEN a saved document whose timeline lacks one of them is refused by its schema (one
    # line, exit 29), never read into the console to fail there
    assert printed <= document.RENDERED_COLUMNS["timeline"]
