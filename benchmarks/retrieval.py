"""Recall@K of KramaBench `data_sources` with dsstar's retrieval, per domain, and time per query.

For every domain with `workload/<domain>.json` and `data/<domain>/input/` under --root, each
file is profiled offline (dsstar.data.profiler), then every question ranks the sources (files and
folders of like files). A data source is found when it is in the top-K directly or as a
member of a folder source. Modes: `files` (BM25, every file on its own), `bm25` (BM25 with
folders of like files as one source), and `fused` (bm25 + embeddings by reciprocal rank,
when --embedding-model is given).

A generated city-operations lake (benchmarks/retrieval_lake.py, 20 questions) runs too,
unless --no-city: it shares nothing with the legal slice. So does KramaBench's wildfire
domain as public copies show it (benchmarks/kramabench_wildfire: 21 questions, files cut to
their heads or, where not public, empty), unless --no-wildfire.

Time per query: cold = profile every file + rank (what `dsstar retrieve --offline` costs
without a cache); warm = rank only, profiles (and document embeddings) at hand.

    .venv/bin/python benchmarks/retrieval.py [--root ../shared/bench/kramabench]
        [--embedding-model openai/e5 --embedding-api-base http://127.0.0.1:8000/v1]
        [--paths-only DOMAIN=FILE_LIST ...]   # domains whose data is absent: path words only
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from dsstar.data.profiler import profile_file
from dsstar.data.retrieval import EmbeddingCache, EmbeddingSimilarity, rank_sources
from dsstar.data.retrieval._recall import covered_paths, found
from dsstar.data.sources import DataSource
from dsstar.model.config import LLMConfig

sys.path.insert(0, str(Path(__file__).parent))
from retrieval_lake import build_lake  # noqa: E402

KS = (5, 10, 20)
WILDFIRE = "kramabench_wildfire"  # a second KramaBench domain, bundled


def profiles_of(folder: Path) -> tuple[dict[str, str], float]:
    started = time.perf_counter()
    source = DataSource(str(folder), Path(tempfile.gettempdir()) / "dsstar-cache")
    docs = {f.path: profile_file(source.mount_dir / f.path, f.path) for f in source.files()}
    return docs, time.perf_counter() - started


def evaluate(tasks: list[dict], docs: dict[str, str], similarity=None, group=True) -> dict:
    hits_at = dict.fromkeys(KS, 0)
    total, seconds = 0, []
    for task in tasks:
        started = time.perf_counter()
        hits = rank_sources(task["query"], docs, similarity=similarity, group=group)
        seconds.append(time.perf_counter() - started)
        sources = task["data_sources"]
        sources = [sources] if isinstance(sources, str) else sources
        total += len(sources)
        for k in KS:
            covered = covered_paths(h.members for h in hits[:k])
            hits_at[k] += sum(found(s, covered) for s in sources)
    return {
        "sources": total,
        "recall": {k: hits_at[k] / total for k in KS},
        "found": hits_at,
        "first_s": seconds[0],
        "warm_s": statistics.median(seconds[1:] or seconds),
        "groups": sum(h.path.endswith("/") for h in hits),
        "ranked": len(hits),
    }


def show(domain: str, mode: str, result: dict, cold_extra: float) -> None:
    r = result["recall"]
    print(
        f"{domain:<12} {mode:<7} {result['ranked']:>4} src ({result['groups']} folders)"
        f"  R@5 {r[5]:.3f}  R@10 {r[10]:.3f} ({result['found'][10]}/{result['sources']})"
        f"  R@20 {r[20]:.3f}  cold {cold_extra + result['first_s']:.2f} s/q"
        f"  warm {result['warm_s'] * 1000:.0f} ms/q",
        flush=True,
    )


def scale_timing(files: int = 1560) -> None:
    """Rank time on a lake of `files` profile-sized documents (60 folders of unlike files)."""
    import random

    rnd = random.Random(1)
    words = [f"term{i}" for i in range(5000)]
    docs = {}
    for i in range(files):
        columns = rnd.sample(words, 8)
        lines = [
            f"  - {c} (int64): nulls=0, unique=3, examples=['{rnd.choice(words)}']" for c in columns
        ]
        docs[f"folder{i % 60}/file_{i}.csv"] = "\n".join(
            ["columns:", *lines, *rnd.choices(words, k=150)]
        )
    seconds = []
    for question in ("term1 term2 revenue", "term9 per term10", "term77", "term5 by term6"):
        started = time.perf_counter()
        rank_sources(question, docs)
        seconds.append(time.perf_counter() - started)
    print(
        f"{files}-file generated lake: first question {seconds[0]:.2f} s (tokenize, group, index),"
        f" next questions {statistics.median(seconds[1:]) * 1000:.0f} ms (cached in the process)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=Path("../shared/bench/kramabench"))
    parser.add_argument("--embedding-model")
    parser.add_argument("--embedding-api-base")
    parser.add_argument("--input-types", action="store_true", help="send query/passage types")
    parser.add_argument("--paths-only", action="append", default=[], metavar="DOMAIN=LIST")
    parser.add_argument("--no-city", action="store_true", help="skip the generated city lake")
    parser.add_argument("--no-wildfire", action="store_true", help="skip the wildfire slice")
    args = parser.parse_args()

    domains = []
    if not args.no_city:  # a generated lake unrelated to KramaBench's legal slice
        city = Path(tempfile.mkdtemp(prefix="dsstar-city-lake-"))
        (city / "workload").mkdir()
        tasks = build_lake(city / "data" / "city" / "input")
        (city / "workload" / "city.json").write_text(json.dumps(tasks))
        domains.append(
            ("city (gen)", city / "workload" / "city.json", city / "data/city/input", None)
        )
    bundled = Path(__file__).resolve().parent / WILDFIRE
    roots = [args.root] + ([] if args.no_wildfire or args.root.resolve() == bundled else [bundled])
    for root in roots:
        for workload in sorted((root / "workload").glob("*.json")):
            folder = root / "data" / workload.stem / "input"
            if folder.is_dir():
                domains.append((workload.stem, workload, folder, None))
    for item in args.paths_only:
        name, _, listing = item.partition("=")
        domains.append((name, args.root / "workload" / f"{name}.json", None, Path(listing)))
    if not args.paths_only and not any(f and args.root in f.parents for _, _, f, _ in domains):
        print(f"no KramaBench domains under {args.root}", file=sys.stderr)
        return 2
    scale_timing()
    for name, workload, folder, listing in domains:
        tasks = json.loads(workload.read_text())
        if folder is not None:
            docs, profile_s = profiles_of(folder)
        else:  # only the file names are known: rank by path words alone
            docs = dict.fromkeys(listing.read_text().split("\n"), "")
            docs.pop("", None)
            profile_s = 0.0
        print(f"{name}: {len(tasks)} questions, {len(docs)} files, profiled in {profile_s:.2f} s")
        show(name, "files", evaluate(tasks, docs, group=False), profile_s)
        show(name, "bm25", evaluate(tasks, docs), profile_s)
        if args.embedding_model:
            config = LLMConfig(model=args.embedding_model, api_base=args.embedding_api_base)
            cache = EmbeddingCache(config, store={})
            similarity = EmbeddingSimilarity(cache, input_types=args.input_types)
            result = evaluate(tasks, docs, similarity=similarity)
            show(name, "fused", result, profile_s)
            print(f"{'':<12} embedding requests: {cache.requests}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
