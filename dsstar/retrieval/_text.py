"""Words for ranking: split paths and identifiers, drop stop words, stem when PyStemmer is there."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath

__all__ = ["document_text", "path_words", "span_years", "tokenize"]

# camelCase and ACRONYMWords boundaries: "StateMSAData" -> "State MSA Data"; a plural
# acronym stays whole: "CSVs", "IDs".
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])(?![A-Z]s(?![a-z]))")
_WORD = re.compile(r"[^\W_]+")  # letters and digits of any script; "_" splits words
# Words that carry no topic in questions or profiles. Short on purpose: profile boilerplate
# ("rows", "columns", "nulls") is common to every document, and BM25's idf already discounts it.
_STOP = frozenset(
    """a about above after all also am an and any are as at be been before being below between
    both but by can could did do does doing each few for from further had has have having he her
    here hers how i if in into is it its itself just me more most my no nor not of off on once
    only or other our out over own same she should so some such than that the their them then
    there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your please give round decimal
    places yes""".split()
)


@lru_cache(maxsize=1)
def _stemmer() -> object | None:
    """An English Snowball stemmer, or None when PyStemmer is not installed."""
    try:
        import Stemmer
    except ImportError:  # optional: ranking works unstemmed, just less forgiving of plurals
        return None
    return Stemmer.Stemmer("english")


def tokenize(text: str) -> list[str]:
    """Lower-cased, stemmed words of `text`; camelCase, paths, '_', '-' and '.' split words."""
    words = [w.lower() for w in _WORD.findall(_CAMEL.sub(" ", text))]
    words = [w for w in words if w not in _STOP]
    stemmer = _stemmer()
    return stemmer.stemWords(words) if stemmer is not None else words  # type: ignore[attr-defined]


def path_words(path: str) -> str:
    """The words of a path: folders, file stem and format, e.g. 'CSVs/2024_CSN_Report.csv'
    -> 'CSVs 2024 CSN Report csv'."""
    parts = [p for p in PurePosixPath(path.rstrip("/")).parts if p not in {"/", "."}]
    return " ".join(_CAMEL.sub(" ", " ".join(_WORD.findall(part))) for part in parts)


def document_text(path: str, profile: str = "", description: str = "", path_boost: int = 2) -> str:
    """What a file is ranked by: its path words (repeated: names are the strongest signal),
    the years its name spans, its offline profile (columns, sheets, tables, headings,
    samples) and its LLM description."""
    words = path_words(path)
    spans = [f"years {lo}-{hi}" for lo, hi in _name_ranges(path)]
    return "\n".join([*([words] * path_boost), *spans, profile or "", description or ""])


_YEAR = r"((?:1[7-9]|20)\d\d)"
# A range of years or dates in a path: "2002-2014", "Jan2016-Dec2022",
# "20131129_to_20140128". Digits on either side would make it part of a longer number.
_NAME_RANGE = re.compile(
    rf"(?<!\d){_YEAR}(?:\d\d){{0,2}}(?:-|_to_|\.\.|–)[A-Za-z]{{0,9}}{_YEAR}(?:\d\d){{0,2}}(?!\d)"
)
# The spans that texts state: "years 2001-2024" (profiler time columns, name ranges above).
_SPAN = re.compile(rf"\byears {_YEAR}-{_YEAR}\b")
_MAX_SPAN = 300  # a wider "span" is a mistake, not a time series: only its ends are words


def _name_ranges(path: str) -> list[tuple[str, str]]:
    return [(lo, hi) for lo, hi in _NAME_RANGE.findall(path) if lo < hi]


def span_years(text: str) -> list[str]:
    """Every year inside the spans `text` states ("years 2001-2024" -> 2001, ..., 2024),
    so that a question about 2007 matches a table whose rows cover 2007."""
    years: list[str] = []
    for lo, hi in _SPAN.findall(text):
        first, last = int(lo), int(hi)
        if first < last <= first + _MAX_SPAN:
            years += [str(y) for y in range(first + 1, last)]  # the ends are words already
    return years
