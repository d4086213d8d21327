"""The answer a final script states (dsstar.algorithm.answer)."""

from __future__ import annotations

import pytest

from dsstar.algorithm.answer import stated_answer


@pytest.mark.parametrize(
    ("stdout", "answer"),
    [
        ("FINAL ANSWER: 0.120132\n", "0.120132"),
        ("loading fees.json\n12 rules match\nFINAL ANSWER: 0.120132\n", "0.120132"),
        ("FINAL ANSWER: A, B\ndone in 0.3 s\n", "A, B"),  # a stray print after it
        ("FINAL ANSWER: \n", ""),  # stated empty: DABStep's empty list
        ("FINAL ANSWER:\n", ""),
        ("FINAL ANSWER: draft\nFINAL ANSWER: Not Applicable\n", "Not Applicable"),
        ("**FINAL ANSWER:** 42\n", "42"),
        ("Northeast, Ada Park\n", "Northeast, Ada Park"),  # one line and nothing else
        ("", None),
        ("   \n", None),
        ("rules: 12\nmean: 0.12\n", None),  # several lines, none stated
    ],
)
def test_stated_answer(stdout: str, answer: str | None) -> None:
    assert stated_answer(stdout) == answer
