"""Algorithm 1 whole (`dsstar.algorithm.steps`, steps 0 to 5) through the local runtime, in
this process and without Prefect, against the scripted model server."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_llm import FakeLLM, text_of
from scenarios import ANSWER, FINAL_ONLY_ANSWER, always_first_time, fence, two_rounds

from dsstar.algorithm import steps
from dsstar.algorithm.local import LocalRuntime
from dsstar.algorithm.runtime import Solved
from dsstar.algorithm.verdict import Status
from dsstar.data.sources import DataSource
from dsstar.events import Analyzed, Retrieved, Reused
from dsstar.execution import scratch
from dsstar.inputs.spec import run_spec
from dsstar.settings import Settings

QUESTION = "Which region had the highest revenue in 2024 H1, and who manages it?"
GUIDELINES = "region name, manager name"


@pytest.fixture
def settings(llm: FakeLLM, tmp_path: Path) -> Settings:
    (tmp_path / "work").mkdir()
    return Settings(
        model="openai/gpt-4o-mini",
        api_base=llm.base_url,
        storage=str(tmp_path / "storage"),
        work_dir=tmp_path / "work",
        exec_timeout=60,
    )


@pytest.fixture
def source(sales: Path, settings: Settings) -> DataSource:
    return DataSource(str(sales), scratch.new_dir(settings.work_dir, "steps-test"))


def local(settings: Settings, source: DataSource, run_id: str, **options) -> LocalRuntime:
    spec = run_spec(settings, run_id, settings.storage, source.mount_dir)
    return LocalRuntime(spec, api_key="sk-x", **options)


def solve(rt: LocalRuntime, source: DataSource) -> steps.Solution:
    return steps.solve(rt, QUESTION, GUIDELINES, source, rt.spec)


def test_files_are_described_then_shown_to_the_agents_through_every_round(
    llm, settings, source
) -> None:
    two_rounds(llm)
    rt = local(settings, source, "steps-1")
    solution = solve(rt, source)

    assert solution.status is Status.VERIFIED and len(solution.plan) == 2
    assert solution.final.result.stdout.strip() == ANSWER and solution.reused_from is None
    described = {a["path"]: a for a in rt.analyses}
    assert set(described) == {"README.md", "orders_2024.csv", "regions.json"}
    assert all(a["source"] == "analyzer" for a in described.values())
    # Step 1 before step 2 before the rounds; every agent sees the descriptions.
    assert [type(event) for event in rt.story] == [Analyzed, Retrieved]
    assert rt.labels.index("planner r00") > rt.labels.index("analyzer orders_2024.csv")
    assert "file: orders_2024.csv" in text_of(llm.calls("planner")[0])
    assert sorted(rt.notes["files_considered"]) == [
        "data/README.md", "data/orders_2024.csv", "data/regions.json"
    ]  # fmt: skip
    assert rt.notes["contracts"]["failed"] == []
    assert [r.number for r in rt.rounds] == [0, 1] and rt.routes[1].label == "Add Step"
    assert rt.labels[-2:] == ["finalyzer", "execute final"]


def test_a_second_run_reads_the_descriptions_from_the_catalog(llm, settings, source) -> None:
    always_first_time(llm)
    solve(local(settings, source, "steps-first"), source)
    analyzed = len(llm.calls("analyzer"))

    rt = local(settings, source, "steps-second")
    solution = solve(rt, source)

    assert analyzed == 3 and len(llm.calls("analyzer")) == analyzed  # none asked again
    assert {a["run_id"] for a in rt.analyses} == {"steps-first"}
    assert solution.status is Status.VERIFIED


def test_a_verified_solution_that_still_answers_is_reused(llm, settings, source) -> None:
    always_first_time(llm)
    previous = Solved("earlier", ["Compute revenue per region."], FINAL_ONLY_ANSWER)
    rt = local(settings, source, "steps-reuse", previous=previous)
    solution = solve(rt, source)

    assert solution.reused_from == "earlier" and solution.status is Status.VERIFIED
    assert solution.plan == previous.plan and solution.final.result.stdout.strip() == ANSWER
    assert rt.labels == ["execute reuse", "verifier reuse"]  # no analysis, no rounds
    assert rt.story == [Reused(previous_run="earlier")]


def test_a_rejected_solution_seeds_the_first_plan(llm, settings, source) -> None:
    always_first_time(llm)
    llm.script("verifier", "No", "Yes")  # the reused solution is rejected, round 00 accepted
    llm.default("coder", lambda req: fence(FINAL_ONLY_ANSWER))
    previous = Solved("earlier", ["Count the regions."], "print('three regions')")
    rt = local(settings, source, "steps-seed", previous=previous)
    solution = solve(rt, source)

    assert solution.reused_from is None and solution.status is Status.VERIFIED
    assert len(rt.reuses) == 1 and rt.reuses[0][2] == "No"
    assert "Count the regions." in text_of(llm.calls("planner")[0])
    assert solution.final.result.stdout.strip() == ANSWER
