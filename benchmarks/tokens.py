"""Input tokens per LLM call, by agent, on a generated context of DABStep's shape.

DABStep's context is seven files: a 138k-row payments CSV, a fees JSON of about a thousand
rules, a markdown manual, a payments readme, merchant data (JSON) and two small CSVs. This
script generates files of that shape, runs one scripted ds-star run over them (analysis of
every file with realistic describing scripts, then --rounds rounds and the finalyzer) against
the scripted OpenAI-compatible server and a started Prefect server, and counts every prompt's
tokens with litellm's token counter (gpt-4o's tokenizer). DS-STAR reports a mean of about
12.2k input tokens per call on DABStep.

    .venv/bin/python benchmarks/tokens.py [--rounds 4] [--rows 138236]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests"), str(REPO / "benchmarks")]

SCHEMES = ["GlobalCard", "NexPay", "SwiftCharge", "TransactPlus"]
MERCHANTS = [
    "Crossfit_Hanna",
    "Belles_cookbook_store",
    "Golfclub_Baron_Friso",
    "Martinis_Fine_Steakhouse",
    "Rafa_AI",
]  # noqa: E501
COUNTRIES = ["NL", "BE", "FR", "IT", "ES", "SE", "GR", "LU"]
QUESTION = "Which card scheme had the highest average fee for Crossfit_Hanna in 2023?"


def payments(path: Path, rows: int) -> None:
    """payments.csv: DABStep's 21 columns, `rows` transactions."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "psp_reference": rng.integers(10**10, 10**11, rows),
            "merchant": rng.choice(MERCHANTS, rows),
            "card_scheme": rng.choice(SCHEMES, rows),
            "year": 2023,
            "hour_of_day": rng.integers(0, 24, rows),
            "minute_of_hour": rng.integers(0, 60, rows),
            "day_of_year": rng.integers(1, 366, rows),
            "is_credit": rng.random(rows) < 0.7,
            "eur_amount": rng.gamma(2.0, 50.0, rows).round(2),
            "ip_country": rng.choice(COUNTRIES, rows),
            "issuing_country": rng.choice(COUNTRIES, rows),
            "device_type": rng.choice(
                ["Windows", "Linux", "MacOS", "iOS", "Android", "Other"], rows
            ),  # noqa: E501
            "ip_address": [f"{h:032x}"[:22] for h in rng.integers(0, 2**62, rows)],
            "email_address": [f"{h:016x}"[:22] for h in rng.integers(0, 2**62, rows)],
            "card_number": [f"{h:016x}"[:22] for h in rng.integers(0, 2**62, rows)],
            "shopper_interaction": rng.choice(["Ecommerce", "POS"], rows, p=[0.9, 0.1]),
            "card_bin": rng.integers(4000, 5000, rows),
            "has_fraudulent_dispute": rng.random(rows) < 0.08,
            "is_refused_by_adyen": rng.random(rows) < 0.06,
            "aci": rng.choice(list("ABCDEFG"), rows),
            "acquirer_country": rng.choice(COUNTRIES, rows),
        }
    )
    frame.to_csv(path, index=False)


def context(folder: Path, rows: int) -> None:
    """The seven files of DABStep's context, generated."""
    rand = random.Random(7)
    payments(folder / "payments.csv", rows)
    fees = [
        {
            "ID": n,
            "card_scheme": rand.choice(SCHEMES),
            "account_type": rand.sample(["R", "D", "H", "F", "S", "O"], rand.randint(0, 2)),
            "capture_delay": rand.choice([None, "immediate", "<3", "3-5", ">5", "manual"]),
            "monthly_fraud_level": rand.choice([None, "<7.2%", "7.2%-7.7%", ">8.3%"]),
            "monthly_volume": rand.choice([None, "<100k", "100k-1m", "1m-5m", ">5m"]),
            "merchant_category_code": rand.sample([5411, 5812, 5813, 7997, 8062, 7372], 2),
            "is_credit": rand.choice([None, True, False]),
            "aci": rand.sample(list("ABCDEFG"), rand.randint(0, 3)),
            "fixed_amount": round(rand.uniform(0, 0.15), 2),
            "rate": rand.randint(10, 99),
            "intracountry": rand.choice([None, 0.0, 1.0]),
        }
        for n in range(1, 1001)
    ]
    (folder / "fees.json").write_text(json.dumps(fees, indent=4))
    sections = [
        "Introduction",
        "Account Type",
        "Merchant Category Code",
        "Authorization Characteristics Indicator",
        "Payment Processing Fees",
        "Fraud",
        "Leveraging Data and Reporting",
        "Appendix",
    ]  # noqa: E501
    manual = ["# Merchant Guide to Optimizing Payment Processing and Minimizing Fees\n"]
    for number, title in enumerate(sections, 1):
        manual.append(f"\n## {number}. {title}\n")
        for _ in range(6):
            words = [rand.choice(["merchants", "fees", "transactions", "card", "scheme", "rate",
                                  "fraud", "volume", "monthly", "capture", "delay", "the", "of",
                                  "and", "to", "a", "is", "for", "in", "risk", "account"])
                     for _ in range(70)]  # fmt: skip
            manual.append(" ".join(words).capitalize() + ".\n")
    (folder / "manual.md").write_text("\n".join(manual))
    (folder / "payments-readme.md").write_text(
        "This is a synthetic dataset of payment transactions processed by the Payments "
        "Processor.\n\nColumns:\n"
        + "\n".join(
            f"- `{c}`: description of {c}"
            for c in ["psp_reference", "merchant", "card_scheme", "year", "eur_amount", "aci"]
        )  # fmt: skip
    )
    merchant = {"capture_delay": "manual", "acquirer": ["gringotts"], "account_type": "F"}
    merchants = [{"merchant": m, "merchant_category_code": 7997, **merchant} for m in MERCHANTS]
    (folder / "merchant_data.json").write_text(json.dumps(merchants, indent=4))
    (folder / "merchant_category_codes.csv").write_text(
        "mcc,description\n" + "".join(f"{1500 + n},Category number {n}\n" for n in range(770))
    )
    (folder / "acquirer_countries.csv").write_text(
        "acquirer,country_code\n" + "".join(f"acq_{n},{c}\n" for n, c in enumerate(COUNTRIES))
    )


DESCRIBE = {
    ".csv": """
import pandas as pd
df = pd.read_csv({path!r})
print("shape:", df.shape)
print(df.dtypes.to_string())
print(df.head(5).to_string())
print(df.describe(include="all").T.to_string())
""",
    ".json": """
import json
data = json.load(open({path!r}))
print(type(data).__name__, "of", len(data), "items")
first = data[0] if isinstance(data, list) else data
print("keys:", list(first))
print(json.dumps(data[:3] if isinstance(data, list) else data, indent=2)[:3000])
""",
    ".md": """
print(open({path!r}).read())
""",
}

SOLUTION = """
import json
import pandas as pd
payments = pd.read_csv("data/payments.csv")
fees = pd.DataFrame(json.load(open("data/fees.json")))
merchant = payments[(payments["merchant"] == "Crossfit_Hanna") & (payments["year"] == 2023)]
rules = fees[fees["card_scheme"].isin(merchant["card_scheme"].unique())]
rules = rules.assign(fee=rules["fixed_amount"] + rules["rate"] * merchant["eur_amount"].mean() / 10000)
average = rules.groupby("card_scheme")["fee"].mean().sort_values(ascending=False)
print(average.to_string())
print("highest:", average.index[0])
"""  # noqa: E501


def script_model(llm, rounds: int) -> None:
    import re

    from fake_llm import text_of
    from scenarios import fence

    def analyzer(req):
        path = re.search(r"`(data/[^`]+)`", text_of(req)).group(1)
        return fence(DESCRIBE[Path(path).suffix].format(path=path))

    verdicts = iter(["No"] * (rounds - 1) + ["Yes"])
    llm.default("analyzer", analyzer)
    llm.default("planner", lambda req: "Compute the average fee per card scheme for the merchant.")  # noqa: E501
    llm.default("coder", lambda req: fence(SOLUTION))
    llm.default("verifier", lambda req: next(verdicts, "Yes"))
    llm.default("router", lambda req: "Add Step")
    llm.default("finalyzer", lambda req: fence(SOLUTION + "\nprint(average.index[0])"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="rounds of the run (default 4)")
    parser.add_argument("--rows", type=int, default=138_236, help="payments rows (138,236)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dsstar-tokens-"))
    data = work / "context"
    data.mkdir()
    started = time.monotonic()
    context(data, args.rows)
    sizes = {p.name: p.stat().st_size for p in sorted(data.iterdir())}
    print(f"context generated in {time.monotonic() - started:.1f} s:",
          ", ".join(f"{k} {v / 1e6:.2f} MB" for k, v in sizes.items()))  # fmt: skip
    (work / "prefect").mkdir()
    from overhead import start_prefect

    server = start_prefect(work / "prefect")
    from fake_llm import FakeLLM

    try:
        with FakeLLM() as llm:
            os.environ.update(
                DSSTAR_MODEL="openai/gpt-4o-mini", DSSTAR_API_BASE=llm.base_url,
                DSSTAR_API_KEY="sk-tokens", DSSTAR_STORAGE=str(work / "storage"),
                DSSTAR_DATABASE_URL=f"sqlite:///{work / 'ledger.db'}",
                DSSTAR_WORK_DIR=str(work), DSSTAR_EXEC_TIMEOUT="120",
            )  # fmt: skip
            script_model(llm, args.rounds)
            from dsstar.flows.ds_star import ds_star

            result = ds_star(question=QUESTION, data=str(data), max_rounds=args.rounds,
                             run_id="tokens", options={"reuse": False})  # fmt: skip
            requests = [r for r in llm.requests if r["status"] == 200]
    finally:
        server.terminate()
        server.wait(timeout=30)
    import litellm

    per_agent: dict[str, list[int]] = defaultdict(list)
    for request in requests:
        tokens = litellm.token_counter(model="gpt-4o", messages=request["messages"])
        per_agent[request["agent"]].append(tokens)
    print(f"run: {result['status']}, {result['rounds']} rounds, {len(requests)} LLM calls")
    print(f"{'agent':<11} {'calls':>5} {'mean input tokens':>18} {'max':>7}")
    for agent, counts in sorted(per_agent.items()):
        print(f"{agent:<11} {len(counts):>5} {statistics.mean(counts):>18,.0f} {max(counts):>7,}")
    every = [n for counts in per_agent.values() for n in counts]
    loop = [n for agent, counts in per_agent.items() if agent != "analyzer" for n in counts]
    print(f"mean input tokens per call: {statistics.mean(every):,.0f} over all calls, "
          f"{statistics.mean(loop):,.0f} without the analyzer (DS-STAR: about 12.2k)")  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
