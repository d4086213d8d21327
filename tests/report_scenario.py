"""Scripted replies for a report over the example sales data, as real models write them: the
decomposer's JSON in a fence with prose around it, a writer that opens with a sentence and
cites [N], a critic's JSON after its reasoning. Sub-runs run at once, so each agent's reply
is chosen by the sub-question its prompt holds, not by order.

Pass 0 asks five sub-questions (a sixth repeats the first in other case and punctuation:
answered once); the critic's review adds a table (revenue by region), repeats sub-question
2 (left out) and asks one whose final script fails (cited as failed, the report goes on).
"""

from __future__ import annotations

import json
import re
from typing import Any

from fake_llm import FakeLLM, text_of
from scenarios import describe_script, fence

QUESTION = "How did sales go in 2024 H1, and where should we look first?"

_LOAD = """
import csv
with open("data/orders_2024.csv") as handle:
    rows = [r for r in csv.DictReader(handle) if r["units"]]
for r in rows:
    r["revenue"] = float(r["units"]) * float(r["unit_price"])
"""

# sub-question -> (plan step, round-0 script, final script)
SUBS: dict[str, tuple[str, str, str]] = {
    "What was the total revenue of 2024 H1, cancelled orders excluded?": (
        "Load the orders, drop cancelled ones (no units) and sum units * unit_price.",
        _LOAD + 'print("total revenue:", sum(r["revenue"] for r in rows))',
        _LOAD + 'print("FINAL ANSWER:", f"{sum(r[\'revenue\'] for r in rows):.2f}")',
    ),
    "Which region had the highest revenue in 2024 H1, and who manages it?": (
        "Sum revenue per region and join the best one with regions.json for its manager.",
        _LOAD
        + """
import json
from collections import Counter
by = Counter()
for r in rows:
    by[r["region_code"]] += r["revenue"]
best = by.most_common(1)[0][0]
regions = {x["code"]: x for x in json.load(open("data/regions.json"))["regions"]}
print("best:", best, regions[best]["name"], regions[best]["manager"]["name"])
""",
        _LOAD
        + """
import json
from collections import Counter
by = Counter()
for r in rows:
    by[r["region_code"]] += r["revenue"]
regions = {x["code"]: x for x in json.load(open("data/regions.json"))["regions"]}
code = by.most_common(1)[0][0]
print("FINAL ANSWER:", f"{regions[code]['name']}, {regions[code]['manager']['name']}")
""",
    ),
    "What was the revenue per month in 2024 H1, as a chart?": (
        "Sum revenue per month of order_date and draw it as a bar chart.",
        _LOAD
        + """
from collections import Counter
months = Counter()
for r in rows:
    months[r["order_date"][:7]] += r["revenue"]
print(sorted(months.items()))
""",
        _LOAD
        + """
from collections import Counter
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
months = Counter()
for r in rows:
    months[r["order_date"][:7]] += r["revenue"]
names = sorted(months)
fig, ax = plt.subplots(figsize=(6, 4))
ax.bar(names, [months[m] for m in names])
ax.set_title("Revenue per month, 2024 H1")
ax.set_xlabel("Month")
ax.set_ylabel("Revenue")
fig.savefig("monthly_revenue.png", dpi=60)
peak = max(names, key=months.get)
print("FINAL ANSWER:", f"peak {peak} with {months[peak]:.2f}; lowest 2024-06 with 20.00")
""",
    ),
    "How many orders were cancelled in 2024 H1?": (
        "Count the orders whose units value is missing.",
        'import csv\nrows = list(csv.DictReader(open("data/orders_2024.csv")))\n'
        'print(sum(1 for r in rows if not r["units"]))',
        'import csv\nrows = list(csv.DictReader(open("data/orders_2024.csv")))\n'
        'print("FINAL ANSWER:", sum(1 for r in rows if not r["units"]))',
    ),
    "Which product sold the most units in 2024 H1?": (
        "Sum units per product over the orders that were not cancelled.",
        _LOAD
        + """
from collections import Counter
units = Counter()
for r in rows:
    units[r["product"]] += float(r["units"])
print(units.most_common())
""",
        _LOAD
        + """
from collections import Counter
units = Counter()
for r in rows:
    units[r["product"]] += float(r["units"])
name, count = units.most_common(1)[0]
print("FINAL ANSWER:", f"{name} ({count:.0f} units)")
""",
    ),
    "What was the revenue per region in 2024 H1, as a table?": (
        "Sum revenue per region and write it as revenue_by_region.csv.",
        _LOAD
        + """
from collections import Counter
by = Counter()
for r in rows:
    by[r["region_code"]] += r["revenue"]
print(by.most_common())
""",
        _LOAD
        + """
import csv as table
from collections import Counter
by = Counter()
for r in rows:
    by[r["region_code"]] += r["revenue"]
with open("revenue_by_region.csv", "w", newline="") as out:
    writer = table.writer(out)
    writer.writerow(["region_code", "revenue"])
    for code, revenue in by.most_common():
        writer.writerow([code, f"{revenue:.2f}"])
print("FINAL ANSWER:", "; ".join(f"{c} {v:.2f}" for c, v in by.most_common()))
""",
    ),
    "What was the average order value of the Midwest region in 2024 H1?": (
        "Average revenue per order of region MW.",
        _LOAD + 'print([r["revenue"] for r in rows if r["region_code"] == "MW"])',
        _LOAD + 'print("FINAL ANSWER:", rows[0]["average_order_value"])',  # KeyError
    ),
}
FIRST = list(SUBS)[:5]
FOLLOW_UPS = list(SUBS)[5:]

DECOMPOSER = (
    "To answer this I'll split it into factoid questions that each analyst can answer from"
    " `orders_2024.csv` and `regions.json` alone:\n\n```json\n"
    + json.dumps(
        [
            {"question": FIRST[0], "format": "a number with 2 decimals"},
            *FIRST[1:],
            # the same as the first, in other case and punctuation: answered once
            {"question": "what was the total revenue of 2024 H1 -- cancelled orders excluded"},
        ],
        indent=2,
    )  # fmt: skip
    + "\n```\n\nThe first two give the headline; the rest explain it."
)

WRITER_0 = """Here is the report.

# Sales in 2024 H1

Revenue came to 459.50 [1], led by the Northeast, managed by Ada Park [2].

## Over time

Sales peaked in 2024-04 with 150.00 and were lowest in 2024-06 with 20.00 [3].

## Orders and products

- 1 order was cancelled [4].
- Widget sold the most units, 47 [5].
"""

CRITIC = """The draft is accurate, but it never breaks revenue down by region, which the question
("where should we look first") needs, and it says nothing about order values.

```json
{
  "issues": ["Revenue per region is missing: how far ahead is the Northeast?"],
  "sub_questions": [
    {"question": "%s", "format": "a table"},
    {"question": "%s"},
    {"question": "%s", "format": "a number with 2 decimals"}
  ]
}
```""" % (FOLLOW_UPS[0], FIRST[1], FOLLOW_UPS[1])  # noqa: UP031 - the JSON's braces

WRITER_1 = """# Sales in 2024 H1

Revenue came to 459.50 [1], led by the Northeast, managed by Ada Park [2]; see the
[dashboard](https://evil.example/x) <script>alert('x')</script>.

## By region

The Northeast brought 207.00, the Southwest 130.00 and the Midwest 122.50 [6]. The Midwest's
average order value could not be computed [7]; an old estimate said 99 [9].

## Over time

Sales peaked in 2024-04 with 150.00 and were lowest in 2024-06 with 20.00 [3].

## Orders and products

- 1 order was cancelled [4].
- Widget sold the most units, 47 [5].

## References

1. a list the writer should not write
"""


def sub_question(request: dict[str, Any]) -> str | None:
    """The sub-question a sub-run's request is about (its prompt's `## Question`)."""
    text = text_of(request)
    found = re.search(r"## Question\n(.+)", text)
    return found.group(1).strip() if found else None


def _by_sub(kind: str):
    def reply(request: dict[str, Any]) -> str:
        plan, code, final = SUBS[sub_question(request)]
        if kind == "planner":
            return plan
        if kind == "coder":
            return fence(code)
        if kind == "verifier":
            return "The script computes exactly what the question asks, and ran.\n\n**Yes**"
        return "Here is the final script.\n\n" + fence(final)

    return reply


def script(llm: FakeLLM) -> None:
    """Every agent of the report answered as above."""
    llm.default("analyzer", describe_script)
    for agent in ("planner", "coder", "verifier", "finalyzer"):
        llm.default(agent, _by_sub(agent))
    llm.default("decomposer", lambda request: DECOMPOSER)
    llm.default("writer", lambda request: WRITER_0 if label(request) == "writer 0" else WRITER_1)
    llm.default("critic", lambda request: CRITIC)


def label(request: dict[str, Any]) -> str:
    """The call's label (its X-DSStar-Call header): "writer 0", "planner r00", ..."""
    from dsstar.model.recorded import call_label

    return call_label(request["headers"].get("x-dsstar-call", ""))
