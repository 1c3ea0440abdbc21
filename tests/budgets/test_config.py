"""Budgets files (``xlaprof.budgets.config``) a repository brings (issue 48): any TOML value
of any budget gives budgets or one ``BudgetError``, never a crash (an integer past any float
reached ``math.isfinite`` and exited 70)."""

from __future__ import annotations

from pathlib import Path

import hypothesis
from hypothesis import strategies as st

from xlaprof.budgets.config import Budgets
from xlaprof.errors import BudgetError

# TOML values as text: integers past any float and int64, floats out of range, the wrong types.
_VALUES = [
    "0",
    "-1",
    "1.5",
    str(10**400),
    str(-(10**400)),
    str(2**64),
    "1e400",
    "nan",
    "inf",
    "-inf",
    "true",
    '"x"',
    '""',
    "[]",
    "[1, 2]",
    '["a", 1]',
    "{ a = 1 }",
    "1979-05-27T07:32:00Z",
]


@hypothesis.settings(max_examples=60, database=None)
@hypothesis.given(
    settings=st.dictionaries(
        st.sampled_from(Budgets.options()), st.sampled_from(_VALUES), min_size=1, max_size=4
    )
)
def test_any_budget_value_gives_budgets_or_one_error(
    settings: dict[str, str], tmp_path_factory: object
) -> None:
    folder: Path = tmp_path_factory.mktemp("budgets")  # type: ignore[attr-defined]
    path = folder / "budget.toml"
    path.write_text("".join(f"{key} = {value}\n" for key, value in settings.items()))
    # WHEN read THEN budgets, or one line of BudgetError
    try:
        Budgets.from_file(path)
    except BudgetError as error:
        assert "\n" not in str(error)
