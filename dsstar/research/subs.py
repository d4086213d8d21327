"""Sub-questions and their answers: what the decomposer and the critic propose, numbered for
citation, duplicates left out, and what each DS-STAR run answered."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from dsstar.algorithm.verdict import ANSWERED, Status

__all__ = ["SKIPPED", "SubAnswer", "SubQuestion", "key", "numbered", "sub_run_id"]

# A sub-question no run was started for: the report's ceiling was reached first.
SKIPPED = "skipped"
# How many characters of an answer a prompt or a reference shows; the run keeps it whole.
ANSWER_CHARS = 1500

_WORDS = re.compile(r"[^\w]+")


def key(question: str) -> str:
    """What makes two sub-questions the same: their words, case and punctuation aside."""
    return _WORDS.sub(" ", question.casefold()).strip()


def sub_run_id(report_id: str, number: int) -> str:
    """The run id of sub-question `number` of a report: the same at every attempt, so that a
    resumed report finds its finished sub-runs (and `dsstar.model.recorded` their replies)."""
    return f"{report_id}-q{number:02d}"


@dataclass(frozen=True)
class SubQuestion:
    """A sub-question, numbered as the report cites it ([number]); `round` is the pass that
    asked it (0: the decomposer, k: the critic's k-th review)."""

    number: int
    question: str
    guidelines: str = ""
    round: int = 0


def numbered(
    proposed: list[dict[str, str]], asked: list[SubQuestion], most: int, round: int
) -> list[SubQuestion]:
    """At most `most` of `proposed` ({"question", "guidelines"}) as new sub-questions,
    numbered after `asked`; one asked before, or twice in `proposed`, is left out."""
    seen = {key(sub.question) for sub in asked}
    fresh: list[SubQuestion] = []
    for item in proposed:
        text = item["question"].strip()
        if not text or key(text) in seen:
            continue
        seen.add(key(text))
        number = len(asked) + len(fresh) + 1
        fresh.append(SubQuestion(number, text, item.get("guidelines") or "", round))
        if len(fresh) >= most:
            break
    return fresh


@dataclass(frozen=True)
class SubAnswer:
    """What the run of a sub-question ended with: its result (`dsstar run --json`'s keys),
    or `skipped` when it never started."""

    sub: SubQuestion
    run_id: str
    status: str
    answer: str | None = None
    error: str | None = None
    flow_run_id: str | None = None
    solution_uri: str | None = None
    artifacts_uri: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    rounds: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0

    @property
    def answered(self) -> bool:
        """Whether its run produced an answer (one the verifier never accepted included)."""
        return self.status in ANSWERED and self.answer is not None

    @property
    def number(self) -> int:
        return self.sub.number

    @classmethod
    def of(cls, sub: SubQuestion, result: dict[str, Any]) -> SubAnswer:
        """From a run's result (`dsstar.views.report.run_result`'s keys)."""
        known = {name: result.get(name) for name in cls.__dataclass_fields__ if name in result}
        known.pop("sub", None)
        known["outputs"] = list(result.get("outputs") or [])
        for name in ("rounds", "llm_calls", "input_tokens", "output_tokens"):
            known[name] = int(result.get(name) or 0)
        known["status"] = str(result.get("status") or Status.FAILED.value)
        known["run_id"] = str(result.get("run_id") or "")
        return cls(sub=sub, **known)

    @classmethod
    def skipped(cls, sub: SubQuestion, run_id: str, why: str) -> SubAnswer:
        return cls(sub=sub, run_id=run_id, status=SKIPPED, error=why)

    def status_text(self) -> str:
        """How its run ended, in words a reader (and the writer) understands."""
        return {
            Status.VERIFIED: "verified",
            Status.MAX_ROUNDS: "not verified: the rounds ran out, best answer given",
            Status.ACCEPTED: "accepted by a person",
            Status.NOT_APPLICABLE: "the files cannot answer it",
            Status.OVER_BUDGET: "stopped at the report's spending ceiling",
            Status.FAILED: "failed",
            SKIPPED: "not started: the report's spending ceiling was reached",
        }.get(self.status, self.status)

    def for_prompt(self) -> dict[str, Any]:
        """How the writer and the critic see it (the answer clipped; files by name)."""
        answer = self.answer or ""
        if len(answer) > ANSWER_CHARS:
            answer = answer[:ANSWER_CHARS] + f" [... {len(answer) - ANSWER_CHARS} more characters]"
        return {
            "number": self.number,
            "question": self.sub.question,
            "answered": self.answered,
            "status": self.status_text(),
            "answer": answer,
            "error": (self.error or "").splitlines()[0][:300] if self.error else "",
            "files": [o["name"] for o in self.outputs],
        }

    def to_dict(self) -> dict[str, Any]:
        """As run.json keeps it (`sub_runs`)."""
        values = asdict(self)
        sub = values.pop("sub")
        return {"number": sub["number"], "question": sub["question"],
                "guidelines": sub["guidelines"], "round": sub["round"], **values}  # fmt: skip

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> SubAnswer:
        sub = SubQuestion(values["number"], values["question"], values.get("guidelines") or "",
                          values.get("round") or 0)  # fmt: skip
        return cls.of(sub, values)
