"""Prompt sizes, per agent and round, when every output and every reply is a megabyte.

Builds the prompts a run would send (the agents' own render functions, with the settings'
cuts: max_output_chars, max_description_chars) for scripts that print 1 MB, a planner that
replies 1 MB steps, a coder that replies 1 MB scripts and four files with 1 MB descriptions,
and prints the largest prompt of each agent in each round. No model and no Prefect needed.

    .venv/bin/python benchmarks/prompt_sizes.py [--rounds 10] [--megabytes 1]
"""

from __future__ import annotations

import argparse

from dsstar.algorithm import agents
from dsstar.algorithm.agents import FileInfo
from dsstar.settings import Settings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--megabytes", type=float, default=1.0)
    args = parser.parse_args()
    size = int(args.megabytes * 1_000_000)
    settings = Settings()
    output = "o" * (size // 2) + "\n" + "t" * (size // 2)
    code = "x = 1\n" * (size // 6)
    files = [
        FileInfo(f"data/file{i}.csv", agents.clip("d" * size, settings.max_description_chars))
        for i in range(4)
    ]
    question = "Which region had the highest revenue?"
    limit = settings.max_output_chars
    print(f"outputs, replies and descriptions of {size:,} characters each;")
    print(f"max_output_chars={limit}, max_description_chars={settings.max_description_chars}\n")
    print(f"{'round':>5} {'planner':>9} {'coder':>9} {'verifier':>9} {'router':>9} "
          f"{'debugger':>9} {'finalyzer':>9}")  # fmt: skip
    plan: list[str] = []
    for number in range(args.rounds):
        plan.append(agents.planner.parse("Step: " + "s" * size) or "")
        sizes = {
            "planner": agents.planner.render_next(
                question=question, files=files, plan=plan, last_output=output,
                max_output_chars=limit,
            ),
            "coder": agents.coder.render_next(
                question=question, files=files, plan=plan, base_code=code
            ),
            "verifier": agents.verifier.render(
                question=question, plan=plan, code=code, output=output, max_output_chars=limit
            ),
            "router": agents.router.render(
                question=question, plan=plan, output=output, files=files, max_output_chars=limit
            ),
            "debugger": agents.debugger.render_solution(
                question=question, code=code, error=output, files=files
            ),
            "finalyzer": agents.finalyzer.render(
                question=question, guidelines="", files=files, plan=plan, code=code,
                output=output, max_output_chars=limit,
            ),
        }  # fmt: skip
        chars = {agent: len(messages[0]["content"]) for agent, messages in sizes.items()}
        print(f"{number:>5} " + " ".join(f"{chars[a]:>9,}" for a in sizes))


if __name__ == "__main__":
    main()
