"""A stored run beside its replay: is each round's output, and the answer, as stored?

`dsstar replay RUN_ID` runs a stored run again as a new run, answered by the replies the
stored run kept (`dsstar.model.recorded`), its scripts executed again on the data as it is
now. This module compares the two runs' stored objects (rounds/NN/output.txt and code.py,
run.json's answer and status) and says, briefly, what differs. A report's replay
(`compare_reports`) is compared sub-question by sub-question (each sub-run as a run), and by
the figures its report cites.
"""

from __future__ import annotations

from typing import Any

from dsstar import keys
from dsstar.storage import Store

__all__ = ["compare_reports", "compare_runs", "recorded_model"]

_SHOWN = 80  # characters of a differing line shown in the report


def recorded_model(store: Store, run_id: str) -> str:
    """The model that answers with the replies that made `run_id` (see
    dsstar.model.recorded): its own, and those of the file descriptions it reused."""
    return f"recorded/{store.uri(keys.run_folder(run_id))}"


def compare_runs(store: Store, stored_id: str, replay_id: str) -> dict[str, Any]:
    """How the run `replay_id` compares with `stored_id`: `same` (every round's output and
    the answer as stored), and per round and for the answer what differs (None when same)."""
    rounds = []
    numbers = set(store.listdir(keys.in_run(stored_id, keys.ROUNDS)))
    numbers |= set(store.listdir(keys.in_run(replay_id, keys.ROUNDS)))
    for number in sorted(numbers):
        before = _read(store, stored_id, int(number))
        after = _read(store, replay_id, int(number))
        change = _change(before, after)
        rounds.append({"round": int(number), "same": change is None, "change": change})
    stored = store.read_json(keys.run_record(stored_id))
    now = _record(store, replay_id)
    answer = {
        "stored": stored.get("answer"),
        "now": now.get("answer"),
        "stored_status": stored.get("status"),
        "status": now.get("status"),
    }
    answer_same = (answer["stored"], answer["stored_status"]) == (answer["now"], answer["status"])
    answer["same"] = answer_same
    answer["change"] = None if answer_same else _answer_change(answer, now.get("error"))
    return {
        "run_id": stored_id,
        "replay_run_id": replay_id,
        "same": answer_same and all(r["same"] for r in rounds),
        "rounds": rounds,
        "answer": answer,
    }


def compare_reports(store: Store, stored_id: str, replay_id: str) -> dict[str, Any]:
    """How the report `replay_id` compares with `stored_id`: `same` (every sub-question's
    run as stored, see `compare_runs`, and the same figures cited), per sub-question what
    differs, and the cited figures that changed."""
    stored, now = store.read_json(keys.run_record(stored_id)), _record(store, replay_id)
    replayed = {s["number"]: s for s in now.get("sub_runs") or []}
    subs = []
    for sub in stored.get("sub_runs") or []:
        again = replayed.get(sub["number"])
        if again is None:
            change = "not asked by the replay"
        elif again["question"] != sub["question"]:
            change = f"another sub-question: {_short(again['question'])}"
        elif sub["status"] == "skipped":
            change = None if again["status"] == "skipped" else "answered by the replay"
        else:
            compared = compare_runs(store, sub["run_id"], again["run_id"])
            change = None if compared["same"] else _first_change(compared)
        subs.append({"number": sub["number"], "question": sub["question"],
                     "same": change is None, "change": change})  # fmt: skip
    extra = [n for n in replayed if n not in {s["number"] for s in subs}]
    before, after = _cited(stored), _cited(now)
    figures = sorted(q for q in before.keys() | after.keys() if before.get(q) != after.get(q))
    status_same = stored.get("status") == now.get("status")
    return {
        "run_id": stored_id,
        "replay_run_id": replay_id,
        "same": status_same and not extra and not figures and all(s["same"] for s in subs),
        "status": {"stored": stored.get("status"), "now": now.get("status")},
        "sub_questions": subs,
        "new_sub_questions": extra,
        "figures": {"same": not figures, "changed": figures},
    }


def _cited(record: dict[str, Any]) -> dict[str, str | None]:
    """The answers a report cites, by sub-question."""
    cited = set(record.get("cited") or [])
    return {s["question"]: s.get("answer") for s in record.get("sub_runs") or []
            if s["number"] in cited}  # fmt: skip


def _first_change(compared: dict[str, Any]) -> str:
    for item in compared["rounds"]:
        if not item["same"]:
            return f"round {item['round']:02d}: {item['change']}"
    return f"answer: {compared['answer']['change']}"


def _read(store: Store, run_id: str, number: int) -> tuple[str, str] | None:
    """A round's output and script, or None when the run has no such round."""
    try:
        output = store.read_text(keys.in_run(run_id, keys.round_object(number, "output.txt")))
        code = store.read_text(keys.in_run(run_id, keys.round_object(number, "code.py")))
        return output, code
    except FileNotFoundError:
        return None


def _record(store: Store, run_id: str) -> dict[str, Any]:
    try:
        return store.read_json(keys.run_record(run_id))
    except FileNotFoundError:
        return {"status": "failed", "error": "the replay stored nothing"}


def _change(before: tuple[str, str] | None, after: tuple[str, str] | None) -> str | None:
    """None when a round's output (spaces at the ends of lines aside) and script are as
    stored; else what differs, in a few words."""
    if before is None and after is None:
        return None
    if after is None:
        return "not reached by the replay"
    if before is None:
        return "new in the replay (the stored run had no such round)"
    change = _first_difference(before[0], after[0])
    if before[1] != after[1]:  # a debugger fixed a script that failed only now, say
        change = f"{change}; its script differs too" if change else "its script differs"
    return change or None


def _first_difference(before: str, after: str) -> str:
    """`output line N: was '...', now '...'`, and how many lines differ in all ("" when none)."""
    old, new = _lines(before), _lines(after)
    differing = [i for i in range(max(len(old), len(new))) if _line(old, i) != _line(new, i)]
    if not differing:
        return ""
    first = differing[0]
    more = f" ({len(differing)} lines differ)" if len(differing) > 1 else ""
    return (
        f"output line {first + 1}: was {_short(_line(old, first))},"
        f" now {_short(_line(new, first))}{more}"
    )


def _lines(text: str) -> list[str]:
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _line(lines: list[str], index: int) -> str | None:
    return lines[index] if index < len(lines) else None


def _short(text: str | None) -> str:
    if text is None:
        return "(no line)"
    return repr(text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "...")


def _answer_change(answer: dict[str, Any], error: str | None) -> str:
    def shown(text: str | None) -> str:
        return "no answer" if text is None else _short(text)

    said = f"was {shown(answer['stored'])} ({answer['stored_status']})"
    now = f"now {shown(answer['now'])} ({answer['status']})"
    reason = f": {error.splitlines()[0][:200]}" if error and answer["now"] is None else ""
    return f"{said}, {now}{reason}"
