"""Scripted replies for the example sales data, as a real model could give them."""

from __future__ import annotations

import json
import re
from typing import Any

from fake_llm import Error, FakeLLM, text_of

ANSWER = "Northeast, Ada Park"


def fence(code: str) -> str:
    return f"Here is the script.\n\n```python\n{code.strip()}\n```\n"


def describe_script(request: dict[str, Any]) -> str:
    """An analyzer reply: a script printing the first lines of the file named in the prompt."""
    path = re.search(r"`(data/[^`]+)`", text_of(request)).group(1)
    return fence(
        f"""
from pathlib import Path
p = Path({path!r})
print("file:", p.name, "bytes:", p.stat().st_size)
print(p.read_text(errors="replace")[:400])
"""
    )


def read_chart(request: dict[str, Any]) -> str:
    """A reader reply, as a vision model describes a chart it can make little of: the name
    the prompt gives, the image's kind, and no values it cannot read."""
    name = re.search(r"saved the image attached below as `([^`]+)`", text_of(request)).group(1)
    return (
        f"The image `{name}` is a chart with two labelled axes. Its tick labels and values are"
        " too small to read with confidence at this resolution."
    )


LOAD = """
import pandas as pd
orders = pd.read_csv("data/orders_2024.csv")
orders = orders.dropna(subset=["units"])
orders["revenue"] = orders["units"] * orders["unit_price"]
by_region = orders.groupby("region_code")["revenue"].sum().sort_values(ascending=False)
print("revenue by region:")
print(by_region.to_string())
"""

JOIN = (
    LOAD
    + """
import json
regions = {r["code"]: r for r in json.load(open("data/regions.json"))["regions"]}
best = regions[by_region.index[0]]
print("best region:", best["name"], "manager:", best["manager"]["name"])
"""
)

FINAL = (
    JOIN
    + """
print(f"{best['name']}, {best['manager']['name']}")
"""
)

FINAL_ONLY_ANSWER = """
import json
import pandas as pd
orders = pd.read_csv("data/orders_2024.csv").dropna(subset=["units"])
orders["revenue"] = orders["units"] * orders["unit_price"]
code = orders.groupby("region_code")["revenue"].sum().idxmax()
regions = {r["code"]: r for r in json.load(open("data/regions.json"))["regions"]}
print(f"{regions[code]['name']}, {regions[code]['manager']['name']}")
"""


def two_rounds(llm: FakeLLM, prelude: str = "") -> None:
    """Verifier No then Yes, router Add Step: the run ends verified after two rounds.
    `prelude` is code the coder puts at the top of both of its scripts."""
    llm.default("analyzer", describe_script)
    llm.script(
        "planner",
        "Load the orders and compute revenue per region.",
        "Join the best region with regions.json to find its manager.",
    )
    llm.script("coder", fence(prelude + LOAD), fence(prelude + JOIN))
    llm.script("verifier", "No", "Yes")
    llm.script("router", "Add Step")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))


def backtrack(llm: FakeLLM) -> None:
    """No/Add Step, then No/"Step 2 is wrong!", then Yes: step 2 is replaced."""
    llm.default("analyzer", describe_script)
    llm.script(
        "planner",
        "Load the orders and compute revenue per region.",
        "Average the unit prices per region.",
        "Join the best region with regions.json to find its manager.",
    )
    llm.script("coder", fence(LOAD), fence(LOAD + "\nprint('WRONG_STEP_MARKER')\n"), fence(JOIN))
    llm.script("verifier", "No", "No", "Yes")
    llm.script("router", "Add Step", "Step 2 is wrong!")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))


def never_satisfied(llm: FakeLLM) -> None:
    """The verifier always says No and the router always adds a step."""
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Compute revenue per region and find its manager.")
    llm.default("coder", lambda req: fence(JOIN))
    llm.default("verifier", lambda req: "No")
    llm.default("router", lambda req: "Add Step")
    llm.script("finalyzer", fence(FINAL_ONLY_ANSWER))


def always_first_time(llm: FakeLLM) -> None:
    """Any question is answered in round 00: the verifier accepts the first plan."""
    llm.default("analyzer", describe_script)
    llm.default("planner", lambda req: "Compute revenue per region and find its manager.")
    llm.default("coder", lambda req: fence(JOIN))
    llm.default("verifier", lambda req: "Yes")
    llm.default("router", lambda req: "Add Step")
    llm.default("finalyzer", lambda req: fence(FINAL_ONLY_ANSWER))


def coder_outage(llm: FakeLLM) -> None:
    """From the second coder call on, the model server answers 503 (until `intercept(None)`)."""
    coder_calls = []

    def outage(request: dict[str, Any]) -> Error | None:
        if request["agent"] == "coder":
            coder_calls.append(request)
            if len(coder_calls) >= 2:
                return Error(503, "model overloaded")
        return None

    llm.intercept(outage)


def answered(requests: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(agent, messages) of every request that got an answer: what must never be asked again."""
    return {(r["agent"], json.dumps(r["messages"])) for r in requests if r["status"] == 200}


def asked(requests: list[dict[str, Any]]) -> set[tuple[str, str]]:
    """(agent, messages) of every request."""
    return {(r["agent"], json.dumps(r["messages"])) for r in requests}
