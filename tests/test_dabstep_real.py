"""`dsstar bench run --suite dabstep` on DABStep's real context files, with a scripted model
whose replies carry correct solutions written the way real models answer (reasoning, labels,
stray prints before the answer). Tasks 1273, 1305 and 1464 of the dev set need only fees.json
and merchant_category_codes.csv; two more tasks over the same files check an answer that is
an empty list (an empty string, by the guidelines) and one the files cannot answer ("Not
Applicable"). `bench score` must agree with the run's own scores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import forked_cli
import pytest
from fake_llm import text_of
from scenarios import describe_script, fence
from shared_data import DABSTEP

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not DABSTEP.is_dir(), reason="DABStep's files are not on this machine"),
]

DEV = {"1273", "1305", "1464"}
EMPTY_GUIDELINES = (
    "Answer must be a list of values in comma separated list, eg: A, B, C. If the answer is an"
    " empty list, reply with an empty string. If a question does not have a relevant or"
    " applicable answer for the task, please respond with 'Not Applicable'"
)
NUMBER_GUIDELINES = (
    "Answer must be just a number expressed in EUR rounded to 6 decimals. If a question does"
    " not have a relevant or applicable answer for the task, please respond with 'Not"
    " Applicable'"
)
# Over the same real files: no NexPay rule has a fixed amount above 1 EUR (checked below),
# and no rule at all is for a card scheme called DinersClub.
EXTRA = [
    {"task_id": "empty-1", "level": "hard", "guidelines": EMPTY_GUIDELINES, "answer": "",
     "question": "What is the fee ID or IDs of card scheme NexPay with a fixed amount above 1"
                 " EUR?"},
    {"task_id": "na-1", "level": "hard", "guidelines": NUMBER_GUIDELINES,
     "answer": "Not Applicable",
     "question": "What would be the average fee that the card scheme DinersClub would charge"
                 " for a transaction value of 10 EUR?"},
]  # fmt: skip

LOAD_FEES = """
import json
import pandas as pd

fees = pd.DataFrame(json.load(open("data/fees.json")))
print("fee rules:", len(fees), "columns:", list(fees.columns))

def applies(values, wanted):
    # The manual: an empty or null field of a fee rule applies to all values.
    return values is None or (isinstance(values, list) and not values) or wanted in values
"""

# Per task: (a distinctive part of the question, the coder's body, the final answer expression).
SOLUTIONS = {
    "1273": ("For credit transactions", """
rules = fees[(fees.card_scheme == "GlobalCard")
             & (fees.is_credit.isna() | (fees.is_credit == True))]
fee = (rules.fixed_amount + rules.rate * 10 / 10000).mean()
print("rules:", len(rules), "mean fee:", fee)
""", 'f"{fee:.6f}"'),
    "1305": ("Eating Places and Restaurants", """
mcc = pd.read_csv("data/merchant_category_codes.csv")
code = int(mcc.loc[mcc.description == "Eating Places and Restaurants", "mcc"].iloc[0])
rules = fees[(fees.card_scheme == "GlobalCard")
             & fees.account_type.apply(lambda v: applies(v, "H"))
             & fees.merchant_category_code.apply(lambda v: applies(v, code))]
fee = (rules.fixed_amount + rules.rate * 10 / 10000).mean()
print("mcc:", code, "rules:", len(rules), "mean fee:", fee)
""", 'f"{fee:.6f}"'),
    "1464": ("account_type = R and aci = B", """
rules = fees[fees.account_type.apply(lambda v: applies(v, "R"))
             & fees.aci.apply(lambda v: applies(v, "B"))]
ids = sorted(int(i) for i in rules.ID)
print("matching rules:", len(ids))
""", '", ".join(str(i) for i in ids)'),
    "empty-1": ("fixed amount above 1", """
rules = fees[(fees.card_scheme == "NexPay") & (fees.fixed_amount > 1)]
ids = sorted(int(i) for i in rules.ID)
print("matching rules:", len(ids), ids)
""", '", ".join(str(i) for i in ids)'),
}  # fmt: skip
NOT_APPLICABLE = "DinersClub"


def task_of(req: dict) -> str:
    text = text_of(req)
    if NOT_APPLICABLE in text:
        return "na-1"
    return next(task for task, (said, _, _) in SOLUTIONS.items() if said in text)


def script_model(llm) -> None:
    """Replies as real models write them: a preamble, reasoning before a bold verdict, a
    thinking block, stray prints in the final script before its FINAL ANSWER line."""

    def planner(req: dict) -> str:
        if task_of(req) == "na-1":
            return (
                "<think>fees.json has card schemes GlobalCard, NexPay, SwiftCharge and"
                " TransactPlus only.</think>\nNot Applicable: no fee rule in fees.json is for"
                " a card scheme called DinersClub."
            )
        return "Based on the descriptions, the first step is: load fees.json and apply the rules."

    def coder(req: dict) -> str:
        return "Here is the script:\n\n" + fence(LOAD_FEES + SOLUTIONS[task_of(req)][1])

    def finalyzer(req: dict) -> str:
        task = task_of(req)
        if task == "na-1":
            return fence('print("checked fees.json")\nprint("FINAL ANSWER:", "Not Applicable")')
        _, body, answer = SOLUTIONS[task]
        return fence(f"{LOAD_FEES}{body}\nprint('FINAL ANSWER:', {answer})")

    llm.default("analyzer", describe_script)
    llm.default("planner", planner)
    llm.default("coder", coder)
    llm.default(
        "verifier",
        lambda req: (
            "The script applies the manual's rule for empty fields and prints the"
            " requested value.\n\n**Verdict:** Yes"
        ),
    )
    llm.default("finalyzer", finalyzer)


def write_tasks(tmp: Path) -> tuple[Path, Path]:
    dev = [json.loads(line) for line in (DABSTEP / "tasks" / "dev.jsonl").read_text().splitlines()]
    chosen = [t for t in dev if t["task_id"] in DEV] + EXTRA
    tasks, truth = tmp / "tasks.jsonl", tmp / "truth.jsonl"
    tasks.write_text("".join(json.dumps({**t, "answer": ""}) + "\n" for t in chosen))
    truth.write_text(
        "".join(
            json.dumps({k: t[k] for k in ("task_id", "answer", "level")}) + "\n" for t in chosen
        )
    )
    return tasks, truth


def dsstar(*argv: str) -> subprocess.CompletedProcess:
    return forked_cli.run([sys.executable, "-m", "dsstar", *argv], capture_output=True,
                          text=True, timeout=1200, env=os.environ.copy())  # fmt: skip


def test_the_extra_tasks_truths_hold_on_the_real_files() -> None:
    fees = json.loads((DABSTEP / "context" / "fees.json").read_text())
    assert not [r for r in fees if r["card_scheme"] == "NexPay" and r["fixed_amount"] > 1]
    assert not [r for r in fees if r["card_scheme"] == NOT_APPLICABLE]


@pytest.mark.timeout(1800)
def test_dabstep_real_tasks_score_in_full_and_resume_without_rework(env, llm, tmp_path):
    data = tmp_path / "context"
    shutil.copytree(DABSTEP / "context", data)
    tasks, truth = write_tasks(tmp_path)
    out = tmp_path / "bench"
    script_model(llm)
    argv = ["bench", "run", "--suite", "dabstep", "--tasks", str(tasks), "--data", str(data),
            "--truth", str(truth), "--out", str(out), "--json"]  # fmt: skip
    done = dsstar(*argv)
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["failed"] == 0

    scores = json.loads((out / "scores.json").read_text())
    assert scores["summary"]["all"]["score"] == 100.0, scores["tasks"]
    assert scores["summary"]["all"]["tasks"] == 5
    submission = {
        s["task_id"]: s["agent_answer"]
        for s in map(json.loads, (out / "submission.jsonl").read_text().splitlines())
    }
    assert submission["1273"] == "0.120132" and submission["1305"] == "0.123217"
    assert submission["empty-1"] == "" and submission["na-1"] == "Not Applicable"
    # The manual reached the planner and the coder whole, its rule for null fields included.
    null_rule = "If a field is set to null it means that it applies to all possible values"
    for agent in ("planner", "coder"):
        assert all(null_rule in text_of(r) for r in llm.calls(agent))

    scored = dsstar("bench", "score", "--suite", "dabstep", "--answers",
                    str(out / "submission.jsonl"), "--truth", str(truth), "--json")  # fmt: skip
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert json.loads(scored.stdout)["summary"] == scores["summary"]

    asked = len(llm.requests)
    again = dsstar(*argv)  # every task finished, the empty answer too: nothing is redone
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(llm.requests) == asked
