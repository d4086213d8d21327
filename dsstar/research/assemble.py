"""The report as stored and shown, from the writer's draft and the sub-runs' answers:

    # the writer's title (or the question)
    the writer's text, its citations checked, each chart and table a sub-run delivered placed
    under the paragraph that first cites that sub-run's answer
    ## Further findings      answered sub-questions the text never cites, each cited here
    ## Not answered          sub-questions whose run failed, stopped or never started, and why
    ## References            [N] sub-question, answer and how its run ended; run id, its code
                             and output in storage
    ## About this report     what dsstar's checks found; the spending ceiling, when reached

Every answered sub-question is cited, every [N] resolves (a citation of no answer is taken
out, and said), and the charts are the sub-runs' own files: in report.md a path relative to
it in storage, in report.html and the Prefect UI inline as data: URLs (PNG and JPEG only,
bounded in size).
"""

from __future__ import annotations

import base64
import html
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from dsstar import keys
from dsstar.errors import DSStarError
from dsstar.execution.deliverables import TABLE_SUFFIXES, inline_image_type
from dsstar.research.citations import cited, drop_unresolved, unsupported_numbers
from dsstar.research.document import (
    Block,
    Span,
    block_text,
    heading,
    paragraph,
    read_markdown,
    spans_text,
    to_html,
    to_markdown,
)
from dsstar.research.subs import SubAnswer
from dsstar.storage import Store

__all__ = ["Figure", "Report", "build_report", "inline_src", "load_figures", "relative_src"]

INLINE_IMAGE_BYTES = 1 << 20  # one chart inline up to this size; larger ones are named
INLINE_TOTAL_BYTES = 8 << 20  # all of a report's inline charts together
_PER_ANSWER = 3  # charts, and tables, shown per sub-answer
_TABLE_ROWS = 10
_TABLE_BYTES = 64 << 20  # a table larger than this is named, not previewed
_ANSWER_SHOWN = 600  # characters of an answer in its reference


@dataclass(frozen=True)
class Figure:
    """A chart or table a sub-run delivered (final/outputs/), read from storage."""

    number: int  # the sub-answer it belongs to
    run_id: str
    name: str
    uri: str
    data: bytes = field(repr=False)
    title: str = ""
    media_type: str = ""
    table: dict[str, Any] | None = None  # the table reader's preview, for a table

    @property
    def image(self) -> bool:
        return self.table is None


def load_figures(store: Store, answers: list[SubAnswer]) -> list[Figure]:
    """The charts (PNG, JPEG) and tables (CSV, Parquet, Excel) each answered sub-run
    delivered, at most a few of each per sub-run, read from its stored outputs: a chart's
    bytes when it is small enough to show inline, a table's first rows as the bounded table
    reader previews them (never parsed in this process)."""
    figures = []
    for answer in answers:
        if not answer.answered:
            continue
        images = tables = 0
        for entry in answer.outputs:
            name = str(entry.get("name") or "")
            kind = inline_image_type(name)
            uri = str(entry.get("uri") or "")
            if kind and images < _PER_ANSWER:
                data = _read(store, answer.run_id, name, INLINE_IMAGE_BYTES)
                if data is None and not _stored(store, answer.run_id, name):
                    continue
                images += 1
                title = _chart_title(store, answer.run_id, name) or name
                figures.append(Figure(answer.number, answer.run_id, name, uri, data or b"",
                                      title, kind))  # fmt: skip
            elif not kind and tables < _PER_ANSWER:
                table = _table(store, answer.run_id, name)
                if table is not None:
                    tables += 1
                    figures.append(Figure(answer.number, answer.run_id, name, uri, b"", name,
                                          "table", table))  # fmt: skip
    return figures


def _key(run_id: str, name: str) -> str:
    return keys.in_run(run_id, keys.output(name))


def _read(store: Store, run_id: str, name: str, most: int) -> bytes | None:
    """The output's bytes, or None: gone, larger than `most`, or a name storage refuses."""
    try:
        return store.read_bytes(_key(run_id, name), most=most)
    except (OSError, ValueError, DSStarError):
        return None


def _stored(store: Store, run_id: str, name: str) -> bool:
    try:
        return bool(store.fs.exists(store._path(_key(run_id, name))))
    except (OSError, ValueError):
        return False


def _table(store: Store, run_id: str, name: str) -> dict[str, Any] | None:
    """The first rows of a stored table output, previewed by the bounded table reader; None
    for a file that is no table, too large, gone, or past the reader's bounds."""
    suffix = PurePosixPath(name).suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        return None
    data = _read(store, run_id, name, _TABLE_BYTES)
    if data is None:
        return None
    from dsstar.data.previews import preview_file  # the reader's imports: only for a table

    with tempfile.NamedTemporaryFile(prefix="dsstar-report-", suffix=suffix) as handle:
        handle.write(data)
        handle.flush()
        preview = preview_file(Path(handle.name), name, rows=_TABLE_ROWS)
    return preview if preview is not None and preview.get("shape") else None


def _chart_title(store: Store, run_id: str, name: str) -> str:
    try:
        chart = store.read_json(keys.in_run(run_id, keys.chart(name)))
    except Exception:  # no description (or an unreadable one): the file's name will do
        return ""
    return str(chart.get("graph_title") or "") if isinstance(chart, dict) else ""


def relative_src(report_id: str) -> Callable[[Figure], str | None]:
    """A chart's place relative to the report's report.md in storage (runs/<id>/final/)."""

    def src(figure: Figure) -> str | None:
        return f"../../{quote(figure.run_id)}/{quote(keys.output(figure.name))}"

    return src


def inline_src() -> Callable[[Figure], str | None]:
    """A chart as a data: URL, while it and all before it stay within the bounds."""
    spent = [0]

    def src(figure: Figure) -> str | None:
        size = len(figure.data)
        if not size or size > INLINE_IMAGE_BYTES or spent[0] + size > INLINE_TOTAL_BYTES:
            return None
        spent[0] += size
        return f"data:{figure.media_type};base64,{base64.b64encode(figure.data).decode()}"

    return src


@dataclass(frozen=True)
class Report:
    """A report's blocks and what its checks found."""

    blocks: list[Block]
    outline: list[str]  # the text's headings, as a contents
    cited: list[int]  # the sub-answers the text cites (by number), in order
    dropped: list[int]  # citations taken out: no such answer
    unsupported: list[str]  # numbers of the text that no cited answer holds
    figures: list[Figure]
    numbers: frozenset[int] = frozenset()  # every sub-answer's number: each has a reference

    def checks(self) -> list[str]:
        """What dsstar's checks found, one line each (for the critic, and the report)."""
        found = []
        if self.unsupported:
            found.append("numbers that no cited answer holds: " + ", ".join(self.unsupported))
        if self.dropped:
            found.append("citations of no answer, taken out: "
                         + ", ".join(f"[{n}]" for n in self.dropped))  # fmt: skip
        return found

    def markdown(self, src: Callable[[Figure], str | None]) -> str:
        return to_markdown(_placed(self.blocks, self.figures, src))

    def html(self, title: str) -> str:
        """A self-contained page: the charts inline, no script, nothing fetched; each
        citation links to its reference."""
        body = to_html(_placed(self.blocks, self.figures, inline_src()),
                       cite=lambda n: f"ref-{n}" if n in self.numbers else None)  # fmt: skip
        return _PAGE.format(title=html.escape(title), body=body)


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
 content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 52rem; margin: 2rem auto; padding: 0 1rem;
       line-height: 1.5; color: #1f2328; }}
table {{ border-collapse: collapse; margin: 1rem 0; }}
th, td {{ border: 1px solid #d0d7de; padding: 0.25rem 0.5rem; text-align: left; }}
figure {{ margin: 1rem 0; }} img {{ max-width: 100%; }}
figcaption {{ font-size: 0.9em; color: #57606a; }}
code, pre {{ background: #f6f8fa; }} pre {{ padding: 0.5rem; overflow-x: auto; }}
</style></head>
<body>
{body}
</body></html>
"""


def build_report(
    question: str,
    body: str | None,
    answers: list[SubAnswer],
    figures: list[Figure],
    notes: list[str] = (),
    context: str = "",
) -> Report:
    """The report (see the module) from the writer's `body` (markdown; None when no draft
    could be written: then the answers stand alone), its `answers`, the `figures` their
    runs delivered and `notes` (why some sub-questions are missing, say). `context`: text
    whose numbers a report may state without citing (the question, the outline)."""
    known = {a.number for a in answers}
    text = _checked(read_markdown(body or ""), known)
    blocks, dropped = text[0], text[1]
    if not blocks or blocks[0].kind != "heading" or blocks[0].level != 1:
        blocks.insert(0, heading(1, question))
    if body is None:
        blocks.append(paragraph(("", "No report could be written from the answers; they "
                                     "follow, each with its reference.")))  # fmt: skip
    citing = cited("\n".join(block_text(b) for b in blocks))
    answered = {a.number: a for a in answers if a.answered}
    sources = {n: f"{a.sub.question}\n{a.answer}" for n, a in answered.items()}
    context += "\n" + "\n".join(a.sub.question for a in answers)
    unsupported = unsupported_numbers([block_text(b) for b in blocks[1:]], sources, context)
    outline = [spans_text(b.spans) for b in blocks if b.kind == "heading" and b.level <= 3]
    blocks += _further(a for n, a in answered.items() if n not in citing)
    blocks += _not_answered(answers)
    blocks += _references(answers)
    report = Report(blocks, outline, citing, dropped, unsupported, figures, frozenset(known))
    return replace(report, blocks=report.blocks + _about(report, notes))


def _checked(blocks: list[Block], known: set[int]) -> tuple[list[Block], list[int]]:
    """The writer's blocks with every citation of no answer taken out."""
    dropped: list[int] = []

    def spans(items: tuple[Span, ...]) -> tuple[Span, ...]:
        kept = []
        for style, text in items:
            if style != "code":
                text, gone = drop_unresolved(text, known)
                dropped.extend(gone)
            kept.append((style, text))
        return tuple(kept)

    checked = []
    for block in blocks:
        checked.append(replace(
            block,
            spans=spans(block.spans),
            items=tuple((depth, spans(item)) for depth, item in block.items),
            rows=tuple(tuple(spans(cell) for cell in row) for row in block.rows),
        ))  # fmt: skip
    return checked, list(dict.fromkeys(dropped))


def _further(uncited: Any) -> list[Block]:
    items = [(0, (("", f"{a.sub.question} {_one_line(a.answer, 300)} [{a.number}]"),))
             for a in uncited]  # fmt: skip
    if not items:
        return []
    return [heading(2, "Further findings"), Block("list", items=tuple(items))]


def _not_answered(answers: list[SubAnswer]) -> list[Block]:
    missing = [a for a in answers if not a.answered]
    if not missing:
        return []
    items = []
    for a in missing:
        why = f"{a.status_text()}" + (f": {_one_line(a.error, 200)}" if a.error else "")
        items.append((0, (("", f"{a.sub.question} ({why}) [{a.number}]"),)))
    intro = paragraph(("", "These sub-questions have no answer, so the report cannot say what "
                           "they would have added:"))  # fmt: skip
    return [heading(2, "Not answered"), intro, Block("list", items=tuple(items))]


def _references(answers: list[SubAnswer]) -> list[Block]:
    blocks = [heading(2, "References")]
    for a in answers:
        said = _one_line(a.answer, _ANSWER_SHOWN) if a.answered else "no answer"
        spans: list[Span] = [("strong", f"[{a.number}]"), ("", f" {a.sub.question} "),
                             ("em", "Answer:"), ("", f" {said} ({a.status_text()}). Run "),
                             ("code", a.run_id)]  # fmt: skip
        if a.solution_uri:
            spans += [("", ", code "), ("code", a.solution_uri)]
        if a.artifacts_uri:
            output = f"{a.artifacts_uri}/{keys.final_object('output.txt')}"
            spans += [("", ", output "), ("code", output)]
        blocks.append(paragraph(*spans, ("", "."), anchor=f"ref-{a.number}"))
    return blocks


def _about(report: Report, notes: list[str]) -> list[Block]:
    lines = [*notes, *report.checks()]
    if not lines:
        return []
    return [heading(2, "About this report"),
            Block("list", items=tuple((0, (("", line),)) for line in lines))]  # fmt: skip


def _one_line(text: str | None, most: int) -> str:
    flat = " ".join((text or "").split())
    return flat if len(flat) <= most else flat[: most - 3] + "..."


def _placed(
    blocks: list[Block], figures: list[Figure], src: Callable[[Figure], str | None]
) -> list[Block]:
    """`blocks` with each sub-answer's figures after the first block that cites it (its
    reference, at the latest)."""
    pending = {f.number for f in figures}
    placed: list[Block] = []
    for block in blocks:
        placed.append(block)
        if block.kind == "heading":
            continue
        for number in [n for n in cited(block_text(block)) if n in pending]:
            pending.discard(number)
            for figure in (f for f in figures if f.number == number):
                placed += _figure_blocks(figure, src)
    return placed


def _figure_blocks(figure: Figure, src: Callable[[Figure], str | None]) -> list[Block]:
    """A chart as an image (or, too large to show inline, named with where it is stored);
    a table as its first rows under a line that says whose and where."""
    caption = f"{figure.title} (from [{figure.number}], {figure.name})"
    if figure.table is not None:
        head = figure.table
        rows = [tuple((("", str(c)),) for c in head["columns"])]
        rows += [tuple((("", "" if v is None else str(v)),) for v in row) for row in head["head"]]
        total = (head.get("shape") or [None])[0]
        note = paragraph(
            ("em", f"Table {figure.name} from [{figure.number}]"),
            ("", f": {'?' if total is None else total} rows, the first {len(head['head'])} "
                 "shown; stored at "),
            ("code", figure.uri),
        )  # fmt: skip
        return [note, Block("table", rows=tuple(rows))]
    target = src(figure)
    if target is None:
        return [paragraph(("em", f"Chart {caption}"), ("", ": "), ("code", figure.uri))]
    return [Block("image", text=caption, src=target)]
