"""The core of reports (dsstar.research), without Prefect: the decomposer's, writer's and
critic's replies read the way models write them, sub-questions numbered once, citations and
numbers checked, a model's markdown rebuilt with no link, image or HTML of its own, the
report assembled with its sub-runs' charts and tables, the method's passes and stops, one
meter for a report and its sub-runs, and recordings answering each sub-run from its part."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pytest

from dsstar import keys
from dsstar.algorithm.agents import critic, decomposer, json_value, writer
from dsstar.algorithm.agents.critic import Critique
from dsstar.errors import OverBudget
from dsstar.model.ceiling import Ceiling, forget, meter, share
from dsstar.model.pricing import Estimate
from dsstar.model.recorded import Recording
from dsstar.research.assemble import build_report, inline_src, load_figures, relative_src
from dsstar.research.citations import cited, drop_unresolved, unsupported_numbers
from dsstar.research.document import read_markdown, to_html, to_markdown
from dsstar.research.estimate import lowered
from dsstar.research.figures import report_news
from dsstar.research.loop import Bounds, research
from dsstar.research.subs import SubAnswer, SubQuestion, numbered
from dsstar.storage import Store

# -- replies, as models write them --------------------------------------------------------------

GPT_DECOMPOSITION = """To answer this, I'll break it into factoid sub-questions:

```json
[
  {"question": "What was the total fee in 2023?", "format": "a number with 2 decimals"},
  {"question": "Which card scheme had the highest fees?"}
]
```

Each one can be answered from payments.csv alone."""

CLAUDE_DECOMPOSITION = """<thinking>The fees file and the merchants file matter.</thinking>
Here are the sub-questions, as an object:

{"sub_questions": ["How many merchants are there?", "What is the mean fee per transaction?"]}
"""

GEMINI_LIST = """**Sub-questions**

1. **Q1:** How many transactions were refused in 2023?
2. What share of them were fraudulent?
"""


@pytest.mark.parametrize(
    ("reply", "questions"),
    [
        (GPT_DECOMPOSITION, ["What was the total fee in 2023?",
                             "Which card scheme had the highest fees?"]),
        (CLAUDE_DECOMPOSITION, ["How many merchants are there?",
                                "What is the mean fee per transaction?"]),
        (GEMINI_LIST, ["How many transactions were refused in 2023?",
                       "What share of them were fraudulent?"]),
        ("I cannot think of any.", []),
    ],
)  # fmt: skip
def test_the_decomposer_is_read_as_models_write(reply, questions):
    assert [item["question"] for item in decomposer.parse(reply)] == questions


def test_a_sub_question_keeps_its_format():
    first = decomposer.parse(GPT_DECOMPOSITION)[0]
    assert first == {"question": "What was the total fee in 2023?",
                     "guidelines": "a number with 2 decimals"}  # fmt: skip


def test_json_value_finds_the_list_in_prose():
    assert json_value('Sure! ["a?", "b?"] Let me know.') == ["a?", "b?"]
    assert json_value('```\n{"x": [1, 2]}\n```') == {"x": [1, 2]}
    assert json_value("no json here [not, json]") is None


def test_the_critic_is_read_with_its_issues_and_sub_questions():
    reply = (
        'The draft never gives 2022.\n\n```json\n{"issues": ["No 2022 figure."],'
        ' "sub_questions": [{"question": "What was the fee in 2022?", "format": "a number"}]}'
        "\n```"
    )
    assert critic.parse(reply) == Critique(
        ["No 2022 figure."], [{"question": "What was the fee in 2022?", "guidelines": "a number"}]
    )
    assert critic.parse('```json\n{"issues": [], "sub_questions": []}\n```') == Critique()
    assert critic.parse("Looks complete to me.") == Critique()


def test_the_writer_reply_is_the_report_alone():
    fenced = "Here is the report:\n\n```markdown\n# Fees\n\nUp 3 % [1].\n```\n\nHope it helps."
    assert writer.parse(fenced) == "# Fees\n\nUp 3 % [1]."
    said = "Sure! Here is the revised report.\n\n# Fees\n\nUp [1].\n\n## References\n1. x"
    assert writer.parse(said) == "# Fees\n\nUp [1]."
    assert writer.parse("<think>hmm</think>  ") is None


# -- sub-questions ------------------------------------------------------------------------------


def test_sub_questions_are_numbered_once():
    asked = [SubQuestion(1, "What was the total fee in 2023?")]
    proposed = [
        {"question": "what was the total fee in 2023", "guidelines": ""},  # asked before
        {"question": "How many merchants?", "guidelines": "a number"},
        {"question": "HOW MANY MERCHANTS?!", "guidelines": ""},  # twice in one reply
        {"question": "Which scheme?", "guidelines": ""},
        {"question": "Which country?", "guidelines": ""},
    ]
    fresh = numbered(proposed, asked, most=2, round=1)
    assert fresh == [SubQuestion(2, "How many merchants?", "a number", 1),
                     SubQuestion(3, "Which scheme?", "", 1)]  # fmt: skip


# -- citations and numbers -----------------------------------------------------------------------


def test_citations_resolve_or_are_taken_out():
    assert cited("Up [2][1], then [1, 3]; in [2024].") == [2, 1, 3]
    text, dropped = drop_unresolved("Up [1] and [7]. Both [2, 9][3].", {1, 2, 3})
    assert (text, dropped) == ("Up [1] and. Both [2][3].", [7, 9])


def test_numbers_must_come_from_the_cited_answers():
    answers = {1: "1204.49", 2: "0.1251", 3: "Revenue fell by 12"}
    units = [
        "Revenue was 1,204.5 [1].",  # rounded as the report writes it
        "The share was 12.5 % [2].",  # a fraction shown in percent
        "It fell by -12 % [3].",
        "A top 5 in 2024 [1].",  # the context holds them
        "It was 1,300 [1].",  # no cited answer holds it
        "Some 0.1251 overall.",  # no citation: any answer will do
    ]
    assert unsupported_numbers(units, answers, context="the top 5 merchants of 2024") == ["1,300"]


# -- the writer's markdown, rebuilt --------------------------------------------------------------

HOSTILE = """# Fees **report**

Up 3 % [1]; see [the dashboard](https://evil.example/x) and ![x](https://evil.example/p.png)
<img src=x onerror=alert(1)> <script>alert('x')</script> www.evil.example

- a *point* [2]
  - nested `code`

| scheme | fee |
|---|---|
| Visa | [link](javascript:alert(1)) |

```html
<script>alert('fenced')</script>
```
"""


def test_a_models_markdown_keeps_its_structure_and_loses_its_links():
    blocks = read_markdown(HOSTILE)
    assert [b.kind for b in blocks] == ["heading", "paragraph", "list", "table", "code"]
    markdown = to_markdown(blocks)
    assert markdown.startswith("# Fees **report**\n")
    assert "- a *point* \\[2\\]\n    - nested `code`" in markdown
    assert "| Visa | \\[link\\]\\(javascript\\:alert\\(1\\)\\) |" in markdown  # text
    assert "evil" not in markdown.replace("www\\.evil\\.example", "")
    text, code = markdown.split("```\n", 1)
    assert not re.search(r"(?<!\\)(<|\]\()", text)  # no tag, no link: only escaped ones
    assert code.startswith("<script>alert('fenced')</script>\n```")  # code, shown as code
    page = to_html(blocks, cite=lambda n: f"ref-{n}")
    assert '<a href="#ref-1">1</a>' in page and "<strong>report</strong>" in page
    assert re.findall(r"<(\w+)", page) and not {"img", "script", "iframe"} & set(
        re.findall(r"<(\w+)", page)
    )
    assert "&lt;script&gt;alert(&#x27;fenced&#x27;)&lt;/script&gt;" in page
    assert "https://evil" not in page and "href=" not in page.replace('href="#ref-', "")


# -- the report as stored ------------------------------------------------------------------------

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def _answer(store: Store, number: int, answer: str | None, outputs: dict[str, bytes] = None):
    run_id = f"r-q{number:02d}"
    entries = []
    for name, data in (outputs or {}).items():
        store.write_bytes(keys.in_run(run_id, keys.output(name)), data)
        entries.append({"name": name, "uri": store.uri(keys.in_run(run_id, keys.output(name)))})
    sub = SubQuestion(number, f"Sub-question {number}?")
    status = "verified" if answer is not None else "failed"
    solution = f"file:///s/{run_id}/final/solution.py"
    error = None if answer else "KeyError: x"
    return SubAnswer(sub, run_id, status, answer, error, outputs=entries, solution_uri=solution)


def test_a_report_cites_every_answer_and_embeds_its_sub_runs_files(tmp_path):
    store = Store(str(tmp_path))
    answers = [
        _answer(store, 1, "459.50", {"chart.png": PNG}),
        _answer(store, 2, "NE 207.00", {"table.csv": b"region,revenue\nNE,207.0\nSW,130.0\n"}),
        _answer(store, 3, "Widget"),
        _answer(store, 4, None),
    ]
    figures = load_figures(store, answers)
    assert [(f.number, f.name, f.image) for f in figures] == [(1, "chart.png", True),
                                                               (2, "table.csv", False)]  # fmt: skip
    body = "Intro without citation.\n\nRevenue was 459.50 [1] and NE had 207.00 [2][8]."
    report = build_report("How did sales go?", body, answers, figures)
    assert report.cited == [1, 2] and report.dropped == [8] and not report.unsupported
    stored = report.markdown(relative_src("r"))
    assert stored.startswith("# How did sales go\\?\n")  # the writer gave no title
    chart = stored.index("](../../r-q01/final/outputs/chart.png)")
    assert stored.index("Revenue was") < chart < stored.index("## Further findings")
    assert "| NE | 207\\.0 |" in stored
    further = stored.split("## Further findings")[1].split("## Not answered")[0]
    assert "Sub\\-question 3\\? Widget \\[3\\]" in further  # uncited: cited here
    assert "Sub\\-question 4\\? \\(failed\\: KeyError\\: x\\) \\[4\\]" in stored
    assert "citations of no answer\\, taken out\\: \\[8\\]" in stored
    assert "data:image/png;base64," in report.markdown(inline_src())
    page = report.html("How did sales go?")
    assert page.count("<img ") == 1 and 'id="ref-4"' in page and 'href="#ref-8"' not in page


def test_an_over_large_chart_is_named_not_inlined(tmp_path):
    store = Store(str(tmp_path))
    answers = [_answer(store, 1, "1", {"big.png": PNG + b"\0" * (1 << 20)})]
    report = build_report("Q?", "It is 1 [1].", answers, load_figures(store, answers))
    shown = report.markdown(inline_src())
    assert "data:image" not in shown and "*Chart big\\.png" in shown


# -- the method ----------------------------------------------------------------------------------


class Scripted:
    """A runtime whose model replies by label and whose sub-runs answer by rule."""

    def __init__(self, replies: dict[str, str], refuse: set[str] = frozenset()) -> None:
        self.replies, self.refuse = replies, refuse
        self.asked: list[str] = []
        self.answered: list[SubQuestion] = []
        self.drafts: list[int] = []
        self.stopped: str | None = None

    def ask(self, agent, label, messages):
        self.asked.append(label)
        if label in self.refuse:
            raise OverBudget(f"the next call ({label}) may cost more than is left")
        return self.replies[label]

    def answer(self, subs):
        self.answered += subs
        return [SubAnswer(s, f"r-q{s.number:02d}", "verified", f"{10 * s.number}") for s in subs]

    def stop_reason(self):
        return self.stopped

    def drafted(self, round, body, critique):
        self.drafts.append(round)


def _replies(**more: str) -> dict[str, str]:
    return {
        "decomposer": '```json\n["A?", "B?", "a?"]\n```',
        "writer 0": "# R\n\nA is 10 [1], B is 20 [2].",
        "critic 1": '```json\n{"issues": ["C is missing"], "sub_questions": ["C?", "B?"]}\n```',
        "writer 1": "# R\n\nA is 10 [1], B is 20 [2], C is 30 [3].",
        "critic 2": '```json\n{"issues": [], "sub_questions": []}\n```',
        **more,
    }


def test_the_method_decomposes_answers_writes_and_refines():
    rt = Scripted(_replies())
    done = research(rt, "Q?", "", [], Bounds(sub_questions=5, follow_ups=3, refinements=3))
    assert [s.question for s in rt.answered] == ["A?", "B?", "C?"]  # each once
    assert rt.asked == ["decomposer", "writer 0", "critic 1", "writer 1", "critic 2"]
    assert done.body.endswith("C is 30 [3].") and rt.drafts == [0, 1] and done.stopped is None


def test_a_writer_refused_at_the_ceiling_leaves_the_answers_standing():
    rt = Scripted(_replies(), refuse={"writer 0"})
    done = research(rt, "Q?", "", [], Bounds(refinements=2))
    assert done.body is None and "writer 0" in done.stopped
    assert rt.asked == ["decomposer", "writer 0"]  # no review of a draft that is not there
    report = build_report("Q?", done.body, done.answers, [])
    assert "No report could be written" in to_markdown(report.blocks)


def test_a_report_stops_refining_once_its_ceiling_is_reached():
    rt = Scripted(_replies())
    rt.stopped = "the report's spending ceiling was reached"
    done = research(rt, "Q?", "", [], Bounds(refinements=2))
    assert rt.asked == ["decomposer", "writer 0"] and done.stopped == rt.stopped


# -- one budget, recorded replies, news ------------------------------------------------------------


def test_a_sub_run_counts_on_its_reports_meter():
    share("rep-q01", "rep")
    try:
        call = {"label": "planner r00", "model": "m", "request": "1", "cost_usd": 0.5,
                "input_tokens": 10, "output_tokens": 5}  # fmt: skip
        meter("rep-q01").charge(call)
        assert meter("rep").cost_usd == 0.5 == meter("rep-q01").cost_usd
        meter("rep").charge(call | {"label": "writer 0", "agent": "writer"})
        # One ceiling for both; the sub-run's own calls are its own (its record, its ledger).
        assert meter("rep-q01").cost_usd == 1.0 and len(meter("rep").calls()) == 2
        assert [c["label"] for c in meter("rep-q01").calls()] == ["planner r00"]
        forget("rep-q01")  # the sub-run ended: the report's meter stays
        assert meter("rep").cost_usd == 1.0
        assert meter("rep-q01") is not meter("rep") and meter("rep-q01").cost_usd == 0
    finally:
        forget("rep-q01")
        forget("rep")


def test_the_ceiling_keeps_the_writers_room():
    room = Estimate(tokens=9000, cost_usd=0.005)
    assert lowered(Ceiling(max_cost=0.02, max_tokens=50_000), room) == Ceiling(0.015, 41_000)
    assert lowered(Ceiling(), room) == Ceiling()


def test_a_recording_answers_each_sub_run_from_its_part(tmp_path):
    recorded = tmp_path / "replies.yaml"
    recorded.write_text(
        "decomposer: the report's own\nplanner r00: the top level's\n"
        "q01:\n  planner r00: sub-question 1's\nq02:\n  planner r00: {text: sub-question 2's}\n"
    )
    recording = Recording(str(recorded))
    assert recording.reply("planner r00", "rep-q01").text == "sub-question 1's"
    assert recording.reply("planner r00", "rep-q02").text == "sub-question 2's"
    assert recording.reply("planner r00", "rep").text == "the top level's"
    assert recording.reply("decomposer", "rep-q01").text == "the report's own"  # falls back


def test_a_recorded_report_answers_its_sub_runs_from_theirs(tmp_path):
    for run_id, text in (("rep", "the report's"), ("rep-q01", "its sub-run's")):
        folder = tmp_path / "runs" / run_id / "replies"
        folder.mkdir(parents=True)
        (folder / "planner-r00-x.json").write_text(json.dumps({"label": "planner r00",
                                                               "text": text}))  # fmt: skip
    recording = Recording(str(tmp_path / "runs" / "rep"))
    assert recording.reply("planner r00", "replay-q01").text == "its sub-run's"
    assert recording.reply("planner r00", "replay").text == "the report's"


def test_a_reports_news_names_changed_figures_and_new_failures():
    def record(run_id: str, answers: dict[str, tuple[str, str | None]]) -> dict:
        subs = [{"number": n, "question": q, "status": s, "answer": a, "run_id": f"{run_id}-{n}"}
                for n, (q, (s, a)) in enumerate(answers.items(), 1)]  # fmt: skip
        return {"run_id": run_id, "cited": [1, 2, 3], "sub_runs": subs}

    before = record("a", {"Fee?": ("verified", "10"), "Top?": ("verified", "Visa"),
                          "Share?": ("verified", "5 %")})  # fmt: skip
    after = record("b", {"FEE": ("verified", "12"), "Top?": ("verified", "Visa"),
                         "Share?": ("failed", None)})  # fmt: skip
    news = report_news(before, after)
    assert news.previous_run == "a" and news.changed == ["FEE: was 10, now 12"]
    assert news.failing == ["Share?: failed (run b-3)"]
    assert report_news(None, after).changed == []


def test_the_demo_recording_answers_every_call_of_its_report():
    """examples/report-replies.yaml holds a reply for the report's own calls and for each
    sub-question's run (checked end to end by the README's `dsstar demo --report`)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "report-replies.yaml"
    recording = Recording(str(path))
    questions = decomposer.parse(recording.reply("decomposer").text)
    follow_ups = critic.parse(recording.reply("critic 1").text).sub_questions
    assert len(questions) >= 3 and follow_ups
    for number in range(1, len(questions) + len(follow_ups) + 1):
        # router r00 and planner r01: asked beside the verdict when rounds ask at once
        labels = ("planner r00", "coder r00", "verifier r00", "router r00", "planner r01",
                  "finalyzer")  # fmt: skip
        for label in labels:
            assert recording.reply(label, f"demo-q{number:02d}").text
    assert recording.reply("writer 0").text and recording.reply("critic 1").text
