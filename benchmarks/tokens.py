"""Input tokens per LLM call, by agent, on DABStep's real context files, and how much of them a
provider's prompt cache can serve.

The context is DABStep's own files (shared/bench/dabstep/context: the fees JSON of 1,000 rules,
the 22 KB manual, the payments readme, merchant data and two small CSVs) plus a payments.csv
generated with the 21 columns its readme gives (the real one is a 23 MB git-LFS object that is
not in the copy). One scripted ds-star run goes over them (analysis of every file with
realistic describing scripts, --rounds rounds, the finalyzer) against the scripted
OpenAI-compatible server and a started Prefect server. Every prompt is counted with litellm's
token counter (gpt-4o's tokenizer). Printed:

- whether DABStep's manual reached the planner's and the coder's prompts whole;
- the mean input tokens per call by agent, against DS-STAR's reported 12.2k;
- the share of input tokens that are cache-eligible: the longest prefix a prompt shares with
  an earlier prompt of the run, from 1,024 tokens on and in steps of 128, as OpenAI caches
  (Gemini's implicit cache works alike; Anthropic's needs the `cache_control` mark dsstar
  sets on the shared prefix);
- the run's cost at gpt-4o's prices with and without those cached reads.

    .venv/bin/python benchmarks/tokens.py [--rounds 4] [--rows 138236]
"""

from __future__ import annotations

import argparse
import os
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


DABSTEP = REPO.parent / "shared" / "bench" / "dabstep" / "context"
NULL_RULE = "If a field is set to null it means that it applies to all possible values"


def context(folder: Path, rows: int) -> None:
    """DABStep's real context files, and a payments.csv of its readme's schema."""
    source = DABSTEP if DABSTEP.is_dir() else Path("/work/shared/bench/dabstep/context")
    for path in source.iterdir():
        shutil.copy(path, folder / path.name)
    payments(folder / "payments.csv", rows)


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
text = open({path!r}).read()
print(len(text), "characters")
print("\\n".join(line for line in text.splitlines() if line.startswith("#")))
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
    llm.default(
        "finalyzer", lambda req: fence(SOLUTION + "\nprint('FINAL ANSWER:', average.index[0])")
    )


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
    from round_overhead import start_prefect

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
            from flows.ds_star import own_flow

            # The person running this chose its data and settings, as with the CLI.
            ds_star = own_flow(None)
            result = ds_star(question=QUESTION, data=str(data), max_rounds=args.rounds,
                             run_id="tokens", options={"reuse": False})  # fmt: skip
            requests = [r for r in llm.requests if r["status"] == 200]
    finally:
        server.terminate()
        server.wait(timeout=30)
    report(requests, result)
    shutil.rmtree(work, ignore_errors=True)


def report(requests: list[dict], result: dict) -> None:
    import litellm
    from fake_llm import text_of

    def tokens(text: str) -> int:
        return litellm.token_counter(model="gpt-4o", text=text)

    per_agent: dict[str, list[int]] = defaultdict(list)
    eligible_total = input_total = 0
    seen: list[str] = []
    for request in requests:
        prompt = text_of(request)
        count = tokens(prompt)
        shared = max((_common_prefix(prompt, earlier) for earlier in seen), default=0)
        cached = tokens(prompt[:shared]) if shared else 0
        eligible_total += cached // 128 * 128 if cached >= 1024 else 0
        input_total += count
        per_agent[request["agent"]].append(count)
        seen.append(prompt)
    for agent in ("planner", "coder"):
        whole = all(NULL_RULE in text_of(r) for r in requests if r["agent"] == agent)
        print(f"manual.md whole in every {agent} prompt: {'yes' if whole else 'NO'}")
    print(f"run: {result['status']}, {result['rounds']} rounds, {len(requests)} LLM calls")
    print(f"{'agent':<11} {'calls':>5} {'mean input tokens':>18} {'max':>7}")
    for agent, counts in sorted(per_agent.items()):
        print(f"{agent:<11} {len(counts):>5} {statistics.mean(counts):>18,.0f} {max(counts):>7,}")
    every = [n for counts in per_agent.values() for n in counts]
    loop = [n for agent, counts in per_agent.items() if agent != "analyzer" for n in counts]
    print(f"mean input tokens per call: {statistics.mean(every):,.0f} over all calls, "
          f"{statistics.mean(loop):,.0f} without the analyzer (DS-STAR: about 12.2k)")  # fmt: skip
    share = eligible_total / input_total
    print(f"cache-eligible input tokens: {eligible_total:,} of {input_total:,} ({share:.2f})")
    price = litellm.model_cost["gpt-4o"]
    output = result.get("output_tokens") or 0
    plain = input_total * price["input_cost_per_token"]
    cached = (input_total - eligible_total) * price["input_cost_per_token"] + (
        eligible_total * price["cache_read_input_token_cost"]
    )
    out = output * price["output_cost_per_token"]
    print(f"cost at gpt-4o prices: ${plain + out:.4f} without caching, ${cached + out:.4f} with")


def _common_prefix(a: str, b: str) -> int:
    n, i = min(len(a), len(b)), 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


if __name__ == "__main__":
    main()
