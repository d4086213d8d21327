"""Replies written the way GPT-4o, Gemini 2.5 and Claude answer dsstar's prompts, each with
the reading it must get. Styles: the bare answer the prompt asks for, reasoning first and the
verdict last, a label before it, bold, fences of every kind, JSON, \\boxed{}, thinking blocks,
negations, spelled-out numbers, preambles and lists.

`CORPUS` is a list of `Case(agent, style, reply, expected)`:
- verifier: True (sufficient) or False;
- router: the wrong step (plan of 3 steps) or None for Add Step;
- planner: the step text; "N/A: <reason>" when the reply says the files cannot answer;
- coder, debugger, finalyzer, analyzer: the script;
- summarizer: the summary.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CORPUS", "Case"]


@dataclass(frozen=True)
class Case:
    agent: str
    style: str
    reply: str
    expected: object


THINK = "<think>\nThe user wants a verdict. Let me look at the output. {}\n</think>\n\n"
THINKING = "<thinking>\nLet me check the plan against the output. {}\n</thinking>\n\n"

# -- verifier ------------------------------------------------------------------------------------

_VERIFIER_YES = [
    ("bare", "Yes"),
    ("bare", "Yes."),
    ("bare lowercase", "yes"),
    ("bold", "**Yes**"),
    ("bold sentence", "**Yes** - the output lists the top region and its manager."),
    ("first word", "Yes, the plan is sufficient: the output shows Northeast and Ada Park."),
    ("first word dash", "Yes \u2014 the code ran cleanly and printed the requested total."),
    ("label", "Verdict: Yes"),
    ("label bold", "**Verdict:** Yes"),
    ("label bold value", "Final answer: **Yes**"),
    ("label lower", "answer: yes"),
    ("heading label", "### Final Verdict: Yes"),
    (
        "reasoning then verdict",
        "The plan loads fees.json, filters the rules for account type H and computes the mean"
        " fee for a 10 EUR transaction. The code implements each step and the output shows"
        " 0.120132.\n\nThe plan is sufficient.\n\nYes",
    ),
    (
        "gemini reasoning",
        "**Analysis of the plan**\n\n1. **Step 1** loads the orders correctly.\n2. **Step 2**"
        " joins the regions and the output shows the manager.\n\nAll the information the"
        " question asks for is present in the output.\n\n**Verdict: Yes**",
    ),
    (
        "claude think",
        THINK.format("The output has both the region and the manager, so yes.") + "Yes",
    ),
    (
        "claude thinking tag",
        THINKING.format("Is anything missing? No, nothing is missing.") + "Yes",
    ),
    (
        "think says no, answer yes",
        THINK.format("At first I thought No, the manager was missing, but it is there.") + "Yes.",
    ),
    ("json", '{"sufficient": true}'),
    ("json fenced", '```json\n{"sufficient": true, "reason": "the total is printed"}\n```'),
    ("json verdict string", '{"verdict": "Yes", "explanation": "All steps ran."}'),
    ("boxed", "The output contains the mean fee.\n\n\\boxed{Yes}"),
    ("boxed text", "$\\boxed{\\text{Yes}}$"),
    ("fenced word", "```\nYes\n```"),
    ("quoted", '"Yes"'),
    ("answer is", "The answer is yes."),
    (
        "sufficient sentence",
        "The code implements the plan, ran without errors and its output answers the"
        " question. The plan is sufficient.",
    ),
    ("yes first then reasons", "Yes.\n\nThe script prints 0.120132, which answers the question."),
    (
        "no-word inside reasoning",
        "No errors occurred and no step is missing; the output has the answer.\n\nYes",
    ),
    ("trailing period bold", "**Yes.**"),
    (
        "bold word after the sentence",
        "The script prints the region with the most revenue and its manager, which answers the"
        " question. **Yes**",
    ),
    ("bold word after the reasoning", "Both numbers are printed and they agree. __Yes.__"),
    (
        "claude italic word last",
        "The output names Northeast and Ada Park, as the question asks. *Yes*",
    ),
    (
        "gpt markdown",
        "### Evaluation\n- The code runs without errors.\n- The output shows the fee.\n\n"
        "**Answer:** Yes",
    ),
]

_VERIFIER_NO = [
    ("bare", "No"),
    ("bare", "No."),
    ("bold", "**No**"),
    ("first word", "No, the output does not yet show who manages the region."),
    ("first word dash", "No - the merchant's MCC is never looked up."),
    ("label", "Verdict: No"),
    ("label bold", "**Verdict:** No"),
    ("label bold value", "Final answer: **No**"),
    (
        "reasoning then verdict",
        "The plan computes revenue per region, but the question also asks for the manager,"
        " which the output does not show.\n\nThe plan is not sufficient.\n\nNo",
    ),
    (
        "yes-word inside reasoning",
        "Yes, the code ran, but the output only lists the fee rules; the average is never"
        " computed.\n\nVerdict: No",
    ),
    (
        "gemini reasoning",
        "**Assessment**\n\nThe script filters the transactions to 2023 but never applies the"
        " fee rules, so the requested fee delta is missing.\n\n**Conclusion:** No",
    ),
    ("claude think", THINK.format("The fee is missing. The answer must be no.") + "No"),
    (
        "think says yes, answer no",
        THINKING.format("Yes, it ran. But wait: the filter uses 2022.") + "No.",
    ),
    ("json", '{"sufficient": false}'),
    ("json fenced", '```json\n{"sufficient": false, "missing": "the manager name"}\n```'),
    ("json string", '{"answer": "No"}'),
    ("boxed", "\\boxed{No}"),
    ("insufficient sentence", "The plan is insufficient: it never joins the regions."),
    ("not sufficient sentence", "This plan is not yet sufficient to answer the question."),
    ("isn't sufficient", "The output isn't sufficient; it lacks the card scheme filter."),
    ("lower label", "answer: no"),
    ("fenced word", "~~~\nNo\n~~~"),
    (
        "gpt list then verdict",
        "- Step 1: correct\n- Step 2: the output is empty\n\nTherefore: **No**",
    ),
    ("no first then yes-like", "No. Yes, the code runs, but the output misses the total."),
    (
        "bold word after the sentence",
        "The output lists revenue per region but not the manager, so it does not answer the"
        " question. **No**",
    ),
    ("bold word after a colon-less verdict", "The total is printed twice, differently. **No.**"),
]

# Replies that say neither: read as No after one more question.
_VERIFIER_UNCLEAR = [
    ("hedge", "It depends on whether the question means gross or net revenue."),
    ("empty", ""),
    ("only thinking", "<think>\nYes, I think it's fine.\n</think>"),
]

# -- router (a plan of 3 steps) ------------------------------------------------------------------

_ROUTER = [
    ("bare add", "Add Step", None),
    ("bold add", "**Add Step**", None),
    ("bare wrong", "Step 2 is wrong!", 2),
    ("bold wrong", "**Step 3 is wrong!**", 3),
    ("bare step", "Step 1", 1),
    (
        "negated wrong then add",
        "Nothing suggests step 2 is wrong. Add Step",
        None,
    ),
    (
        "hypothetical wrong",
        "If Step 1 were wrong we would see errors; it is fine. Add Step",
        None,
    ),
    (
        "reasoning then add",
        "Steps 1 and 2 load and filter the data correctly; the plan just has not computed the"
        " average yet.\n\nAdd Step",
        None,
    ),
    (
        "reasoning then wrong",
        "Step 1 loads the right file. Step 2 filters on `account_type == 'R'`, but the question"
        " asks about account type H.\n\nStep 2 is wrong!",
        2,
    ),
    ("label add", "Decision: Add Step", None),
    ("label wrong", "**Decision:** Step 2 is wrong!", 2),
    ("final answer label", "Final answer: **Add Step**", None),
    ("json add", '{"decision": "Add Step"}', None),
    ("json wrong", '```json\n{"decision": "Step 3 is wrong!"}\n```', 3),
    ("json number", '{"wrong_step": 2}', 2),
    ("boxed", "\\boxed{Add Step}", None),
    ("boxed wrong", "\\boxed{Step 1 is wrong!}", 1),
    ("spelled", "Step two is wrong!", 2),
    ("ordinal", "The second step is wrong: it filters the wrong year.", 2),
    ("ordinal first", "The first step is incorrect because it reads the wrong file.", 1),
    (
        "claude think",
        THINK.format("Step 2 might be wrong? No, step 2 is fine.") + "Add Step",
        None,
    ),
    (
        "think mentions wrong",
        THINKING.format("Step 1 is wrong? Let me check... no, it is right. Step 3 is wrong.")
        + "Step 3 is wrong!",
        3,
    ),
    ("dont think wrong", "I don't think step 3 is wrong. Add Step", None),
    ("is correct add", "Step 2 is correct.\n\nAdd Step", None),
    ("add a step sentence", "All steps look right; we should add a step that sums the fees.", None),
    ("add another step", "Add another step to compute the mean.", None),
    ("wrong with reason", "Step 1 is wrong! It reads payments.csv instead of fees.json.", 1),
    (
        "wrong then add mention",
        "Step 2 is wrong! Rather than add a step, the filter must be fixed.",
        2,
    ),
    ("was wrong", "step #3 was wrong", 3),
    ("gemini bold reasoning", "**Reasoning:** the join uses the wrong key.\n\n**Step 2**", 2),
    ("quoted", '"Add Step"', None),
    ("backticks", "`Step 2 is wrong!`", 2),
    ("colon", "Step 3: wrong", 3),
    ("no evidence", "There is no evidence that step 1 is wrong, so: Add Step", None),
    ("whether", "I checked whether step 2 is wrong; it is not. Add Step", None),
    ("out of plan", "Step 5 is wrong!", None),
    ("lowercase add", "add step", None),
    ("would be wrong", "Step 2 would be wrong only for 2022 data. Add Step", None),
    ("the wrong step is", "The wrong step is step 3.", 3),
    ("number alone bold", "**2**", 2),
]

_ROUTER_UNCLEAR = [
    ("hedge", "Hard to say without more output."),
    ("fine only", "Step 2 is fine."),
]

# -- planner -------------------------------------------------------------------------------------

STEP = "Load fees.json and keep the rules whose account_type is empty or contains H."
_PLANNER = [
    ("bare", STEP, STEP),
    ("numbered label", f"Step 3: {STEP}", STEP),
    ("hash label", f"Step #2: {STEP}", STEP),
    ("bold numbered label", f"**Step 3:** {STEP}", STEP),
    ("bold hash label dash", f"**Step #4** - {STEP}", STEP),
    ("number alone", f"2. {STEP}", STEP),
    ("label with dash", f"Step 2 - {STEP}", STEP),
    ("label with en dash", f"Step 2 \u2013 {STEP}", STEP),
    (
        "label then bold words",
        "Step 2: **Sum** the value column per region.",
        "Sum the value column per region.",
    ),
    ("bold label", f"**Next step:** {STEP}", STEP),
    ("preamble", f"Based on the output, the next step is: {STEP}", STEP),
    (
        "preamble to",
        "The next step is to load fees.json and keep the rules whose account_type"
        " is empty or contains H.",
        STEP,
    ),
    ("preamble line", f"Here is the next step:\n\n{STEP}", STEP),
    ("preamble bold line", f"**Next step**\n\n{STEP}", STEP),
    ("numbered list", f"1. {STEP}\n2. Compute the mean fee.\n3. Print it.", STEP),
    ("list after preamble", f"I suggest these steps:\n1. {STEP}\n2. Compute the mean fee.", STEP),
    ("bullet", f"- {STEP}", STEP),
    (
        "rationale after",
        f"{STEP}\n\nRationale: the manual says an empty field applies to all.",
        STEP,
    ),
    ("why after", f"**{STEP}**\n\nWhy: the output shows rules of every account type.", STEP),
    ("think", THINK.format("The rules need filtering.") + STEP, STEP),
    ("thinking then label", THINKING.format("Filter next.") + f"Next step: {STEP}", STEP),
    ("heading", f"### Step 2\n{STEP}", STEP),
    ("quoted", f'"{STEP}"', STEP),
    ("backticks", f"`{STEP}`", STEP),
    (
        "first step preamble",
        "The first step is to load fees.json and keep the rules whose"
        " account_type is empty or contains H.",
        STEP,
    ),
    ("proposed", f"Proposed next step: {STEP}", STEP),
    ("step word start", "Step through every row of the CSV.", "Step through every row of the CSV."),
    (
        "two sentences",
        "Load payments.csv. Keep the 2023 rows of Crossfit_Hanna.",
        "Load payments.csv. Keep the 2023 rows of Crossfit_Hanna.",
    ),
    ("gemini bold list", f"**Plan for the next step**\n\n*   **{STEP}**", STEP),
    ("claude preamble sentence", f"Looking at the output, the next step should be: {STEP}", STEP),
    (
        "not applicable",
        "Not Applicable: there is no merchant called Foo_Bar in merchant_data.json.",
        "N/A: there is no merchant called Foo_Bar in merchant_data.json.",
    ),
    (
        "not applicable bold",
        "**Not Applicable** - the files hold no 2021 data.",
        "N/A: the files hold no 2021 data.",
    ),
    (
        "not applicable think",
        THINK.format("No such merchant.") + "NOT APPLICABLE: merchant X is not in the data.",
        "N/A: merchant X is not in the data.",
    ),
]

# -- code agents ---------------------------------------------------------------------------------

SCRIPT = (
    "import json\n"
    "import pandas as pd\n\n"
    "fees = pd.DataFrame(json.load(open('data/fees.json')))\n"
    "rules = fees[fees['card_scheme'] == 'TransactPlus']\n"
    "print(round((rules['fixed_amount'] + rules['rate'] * 10 / 10000).mean(), 6))"
)
DRAFT = "import pandas as pd\nprint(pd.read_json('data/fees.json').shape)"
SNIPPET = "rules = fees[fees['card_scheme'] == 'TransactPlus']"


def _fenced(fence: str, tag: str, body: str = SCRIPT) -> str:
    return f"{fence}{tag}\n{body}\n{fence}"


_CODE = [
    ("python fence", f"```python\n{SCRIPT}\n```"),
    ("py fence", f"```py\n{SCRIPT}\n```"),
    ("py3 fence", f"```py3\n{SCRIPT}\n```"),
    ("python3 fence", f"```python3\n{SCRIPT}\n```"),
    ("Python capital", f"```Python\n{SCRIPT}\n```"),
    ("bare fence", f"```\n{SCRIPT}\n```"),
    ("tilde fence", f"~~~python\n{SCRIPT}\n~~~"),
    ("tilde bare", f"~~~\n{SCRIPT}\n~~~"),
    ("four backticks", f"````python\n{SCRIPT}\n````"),
    ("fence with title", f"```python title=solution.py\n{SCRIPT}\n```"),
    ("braced info", f"```{{.python}}\n{SCRIPT}\n```"),
    ("preamble", f"Here is the complete script:\n\n```python\n{SCRIPT}\n```"),
    (
        "explanation after",
        f"```python\n{SCRIPT}\n```\n\nThis script filters the fee rules and"
        " prints the mean fee for a 10 EUR transaction.",
    ),
    (
        "backticks quoted in prose",
        "I'll put the script in a ```python block as asked; note that"
        f" the rules are filtered first.\n\n```python\n{SCRIPT}\n```",
    ),
    ("inline code in prose", f"The key is `fees['card_scheme']`.\n\n```python\n{SCRIPT}\n```"),
    (
        "think draft",
        f"<think>\nA first try:\n```python\n{DRAFT}\n```\nNo, I need the mean."
        f"\n</think>\n\n```python\n{SCRIPT}\n```",
    ),
    (
        "thinking draft longer",
        "<thinking>\n```python\n" + SCRIPT + "\nprint('debug', fees.shape)"
        "\nprint(fees.head())\nprint(fees.columns)\n```\n</thinking>\n\nFinal script:\n\n"
        f"```python\n{SCRIPT}\n```",
    ),
    (
        "revised after draft",
        f"First attempt:\n```python\n{DRAFT}\n```\n\nThat only shows the"
        f" shape. Revised version:\n```python\n{SCRIPT}\n```",
    ),
    (
        "key change after",
        f"```python\n{SCRIPT}\n```\n\nThe key change is:\n```python\n{SNIPPET}\n```",
    ),
    (
        "run command after",
        f"```python\n{SCRIPT}\n```\n\nRun it with:\n```bash\npython solution.py\n```",
    ),
    (
        "bare run command after",
        f"```python\n{SCRIPT}\n```\n\nRun it with:\n```\npython solution.py\n```",
    ),
    ("pip before", f"```bash\npip install pandas\n```\n```python\n{SCRIPT}\n```"),
    ("sample output after", f"```python\n{SCRIPT}\n```\n\nExpected output:\n```\n0.120132\n```"),
    (
        "output table after",
        f"```python\n{SCRIPT}\n```\n\nOutput:\n```text\nregion  revenue\nNorth   12.5\n```",
    ),
    ("cut off", f"```python\n{SCRIPT}"),
    (
        "indented in list",
        "1. Save this as solution.py:\n\n    ```python\n"
        + "\n".join("    " + line if line else "" for line in SCRIPT.splitlines())
        + "\n    ```",
    ),
    (
        "gemini bold heading",
        f"**Corrected script**\n\n```python\n{SCRIPT}\n```\n\n**Changes:**"
        "\n* Filter by card scheme.",
    ),
    (
        "claude think plus prose",
        THINK.format("I will fix the KeyError.") + "The column is"
        f" `card_scheme`, not `scheme`. Here is the fix:\n\n```python\n{SCRIPT}\n```",
    ),
    ("crlf", f"```python\r\n{SCRIPT}\r\n```".replace("\n", "\r\n").replace("\r\r", "\r")),
    ("reasoning content only answer", f"```python\n{SCRIPT}\n```\n"),
]

_NO_CODE = [
    ("refusal", "I cannot write this script without seeing the data."),
    ("shell only", "```bash\npip install pandas\n```"),
    ("prose with quoted fence", "Wrap the script in ```python fences, then run it."),
    ("only thinking code", f"<think>\n```python\n{DRAFT}\n```\n</think>\nI need more details."),
]

# -- summarizer ----------------------------------------------------------------------------------

SUMMARY = "KeyError: 'scheme' at line 4: `fees['scheme']`; columns are card_scheme, rate."
_SUMMARIZER = [
    ("bare", SUMMARY),
    ("think", THINK.format("Find the exception.") + SUMMARY),
    ("padded", f"\n\n{SUMMARY}\n"),
]


def _build() -> list[Case]:
    cases = [Case("verifier", s, r, True) for s, r in _VERIFIER_YES]
    cases += [Case("verifier", s, r, False) for s, r in _VERIFIER_NO]
    cases += [Case("verifier", f"unclear: {s}", r, None) for s, r in _VERIFIER_UNCLEAR]
    cases += [Case("router", s, r, n) for s, r, n in _ROUTER]
    cases += [Case("router", f"unclear: {s}", r, "unclear") for s, r in _ROUTER_UNCLEAR]
    cases += [Case("planner", s, r, e) for s, r, e in _PLANNER]
    code_agents = ("coder", "debugger", "finalyzer", "analyzer")
    cases += [
        Case(code_agents[i % len(code_agents)], s, r, SCRIPT) for i, (s, r) in enumerate(_CODE)
    ]
    cases += [Case("coder", f"no code: {s}", r, None) for s, r in _NO_CODE]
    cases += [Case("summarizer", s, r, SUMMARY) for s, r in _SUMMARIZER]
    return cases


CORPUS = _build()
