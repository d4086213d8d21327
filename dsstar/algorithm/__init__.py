"""DS-STAR itself (Algorithm 1 of the paper), free of Prefect.

analysis   step 1: a description of every data file, written by the analyzer's script
context    step 2: the files the agents see, within the context budget (budget)
loop       steps 3 to 5: plan, code, execute, verify, route, in rounds
calls      one method per agent, as the loop uses them; unusable replies retried
repair     execute, and let the debugger fix a failing script
runtime    what the loop needs from the world around it (two small protocols)
spec       what settings make of a run: the RunSpec every task gets, and the loop's bounds
verdict    how a round was judged and how a run ended
guidance   what a person may answer between rounds
answer     the answer a final script states
agents/    the eight agents: render a prompt, parse a reply
"""

# The public names of this package are its modules, imported where they are used (several
# pull in heavy libraries that most commands never need).
__all__ = [
    "agents",
    "analysis",
    "answer",
    "budget",
    "calls",
    "context",
    "guidance",
    "loop",
    "repair",
    "runtime",
    "spec",
    "verdict",
]
