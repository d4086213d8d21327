"""Words for ranking: split paths and identifiers, drop stop words, stem when PyStemmer is there."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import PurePosixPath

__all__ = ["document_text", "name_years", "path_words", "span_years", "tokenize"]

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


YEAR = r"((?:1[7-9]|20)\d\d)"  # a year the lakes' files and questions speak of
# A range of years or dates: "2002-2014", "Jan2016-Dec2022", "20131129_to_20140128", and
# the profiler's "years 2001-2024". Digits on either side would make it a longer number.
_RANGE = re.compile(
    rf"(?<!\d){YEAR}(?:\d\d){{0,2}}(?:-|_to_|\.\.|\u2013)[A-Za-z]{{0,9}}{YEAR}(?:\d\d){{0,2}}(?!\d)"
)
_MAX_SPAN = 300  # a wider "span" is a mistake, not a time series: it stands for no year


def _part_words(part: str) -> str:
    return _CAMEL.sub(" ", " ".join(_WORD.findall(part)))


def path_words(path: str) -> str:
    """The words of a path: folders, file stem and format, e.g. 'CSVs/2024_CSN_Report.csv'
    -> 'CSVs 2024 CSN Report csv'. A range of years stays one word: 'Jan2016-Dec2022'
    -> 'Jan 2016-2022 Dec', so that `span_years` sees it."""
    parts = [p for p in PurePosixPath(path.rstrip("/")).parts if p not in {"/", "."}]
    words = []
    for part in parts:
        last = 0
        for match in _RANGE.finditer(part):
            letters = re.sub(r"[^A-Za-z]+", " ", match.group(0)).strip()
            words += [_part_words(part[last : match.start()]), f"{match[1]}-{match[2]}", letters]
            last = match.end()
        words.append(_part_words(part[last:]))
    return " ".join(w for w in words if w)


def document_text(path: str, profile: str = "", description: str = "", path_boost: int = 2) -> str:
    """What a file is ranked by: its path words (repeated: names are the strongest signal),
    its offline profile (columns, sheets, tables, headings, samples) and its LLM description."""
    words = path_words(path)
    return "\n".join([*([words] * path_boost), profile or "", description or ""])


def span_years(text: str) -> list[str]:
    """Every year inside the ranges `text` states, each range once ("years 2001-2024",
    "2002-2014" -> 2001, ..., 2024), so that a question about 2007 matches a table whose
    rows cover 2007."""
    years: list[str] = []
    for lo, hi in dict.fromkeys(_RANGE.findall(text)):
        first, last = int(lo), int(hi)
        if first < last <= first + _MAX_SPAN:
            years += [str(y) for y in range(first, last + 1)]
    return years


# A year that closes a file name: files split by period are named so ("boardings_2023.parquet",
# "water-body-testing-2013.csv"); a leading year ("2024_CSN_Report_Count.csv") is more often
# an edition than the period the rows cover, so it stays a plain word.
_CLOSING_YEAR = re.compile(rf"(?<!\d){YEAR}$")


def name_years(path: str) -> list[str]:
    """The year a file's name closes on, if any: the period a file of a series covers."""
    stem = PurePosixPath(path.rstrip("/")).name.split(".", 1)[0]
    return _CLOSING_YEAR.findall(stem)
