"""Write notebooks/*.ipynb from the cell sources below (outputs stripped: what git stores).

    .venv/bin/python scripts/build_notebooks.py        # regenerate after editing a cell here

The notebooks use only the public API (`import retrieval`: the verbs, their typed results and
`retrieval.plots`; tests/project/test_notebooks.py checks that no other rwb module is imported);
every plot is a `retrieval.plots` function, the same ones `rwb report` draws. Each notebook
reads a run directory given by an environment variable, else makes a small run itself:

- 01: RWB_NOTEBOOK_RUN = an `rwb sweep` run directory;
- 02: RWB_NOTEBOOK_RUN = an `rwb eval` (or sweep) run with several builds;
- 03: RWB_NOTEBOOK_EMBED_RUN, RWB_NOTEBOOK_FANOUT_RUN, RWB_NOTEBOOK_RERANK_RUN,
  RWB_NOTEBOOK_CACHE_RUN = `rwb bench embed|fanout`, `rwb tune rerank|cache` run directories;
- 05: RWB_NOTEBOOK_PROFILE_RUN, RWB_NOTEBOOK_CHURN_RUN = `rwb profile`, `rwb bench churn` runs.

RWB_NOTEBOOK_DIR sets where the small runs go (default: a temporary folder).
"""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ROOT = Path(__file__).resolve().parents[1] / "notebooks"

SETUP = """\
%matplotlib inline
import os
import tempfile
import warnings
from pathlib import Path

import pandas as pd
import yaml
from IPython.display import display

import retrieval

# tqdm.auto (used by the embedding libraries) warns "IProgress not found" in a kernel without
# ipywidgets; rwb shows no bars in notebooks, so the warning is noise
warnings.filterwarnings("ignore", message="IProgress not found")
os.environ.setdefault("TQDM_DISABLE", "1")

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
pd.set_option("display.width", 160)
WORK = Path(os.environ.get("RWB_NOTEBOOK_DIR") or tempfile.mkdtemp(prefix="rwb-notebook-"))
WORK.mkdir(parents=True, exist_ok=True)
"""

FROM_ENV = """
def from_env(name):
    path = os.environ.get(name)
    return retrieval.open_run(path).to_dict() if path else None"""

NB01 = [
    new_markdown_cell("""\
# 01 - ef_search / nprobe trade-offs

What does each extra unit of the search knob buy? This notebook loads a **sweep run**
(`rwb sweep SPEC --out RUN`), plots recall@10 against single-query p95 latency (log x, the
ann-benchmarks convention) and against batch QPS (log y) per backend and build, with the Pareto
front and the target line, looks at the **per-query** recall behind the mean at the chosen point,
picks an operating point and exports it in an engine's own parameter names.

Set `RWB_NOTEBOOK_RUN` to a sweep run directory to look at your own run; otherwise a small grid
sweep (10,000 synthetic vectors, three backends) is made here in under a minute."""),
    new_code_cell(SETUP + """
RUN = os.environ.get("RWB_NOTEBOOK_RUN")"""),
    new_code_cell("""\
SPEC = '''
name: nb01-tradeoffs
dataset: {name: synthetic-20k, n: 10000, n_queries: 200}
k: 10
warmup: 8
batch_repeats: 2
target_recall: 0.95
tune: {strategy: grid, heldout_fraction: 0.5}
indexes:
  - backend: hnswlib
    build: {M: [8, 16], ef_construction: 40}
    search: {ef_search: [10, 16, 24, 32, 48, 64, 96]}
  - backend: faiss-hnsw
    build: {M: 8, ef_construction: 40}
    search: {ef_search: [10, 16, 24, 32, 48, 64, 96]}
  - backend: faiss-ivf
    build: {nlist: 64}
    search: {nprobe: [1, 2, 3, 4, 6, 8, 12, 16]}
'''
if RUN is None:
    run = retrieval.sweep(yaml.safe_load(SPEC), out=WORK / "nb01-sweep")
else:
    run = retrieval.open_run(RUN)
s = run.to_dict()
K, TARGET = int(s["k"]), s.get("target_recall")
print(f"{run.kind} run {run.run_id}: {s.get('dataset')}, k={K}, target recall@{K} = {TARGET}")"""),
    new_markdown_cell("""\
## The measured points and each backend's choice

A sweep chooses, per backend, the cheapest config whose recall *lower confidence bound* meets
the target on the tuning queries, then re-measures it on held-out queries."""),
    new_code_cell("""\
points = run.points()
chosen = run.chosen()
cols = ["label", "build", "search", "recall", "recall_lb", "p95_ms", "qps"]
if chosen:
    display(pd.DataFrame(chosen)[[c for c in cols if c in chosen[0]]])
else:
    print("nothing met the target")"""),
    new_code_cell("""\
display(retrieval.plots.recall_vs_latency(points, k=K, target=TARGET, chosen=chosen))
display(retrieval.plots.recall_vs_qps(points, k=K, target=TARGET, chosen=chosen))"""),
    new_markdown_cell("""\
## Per-query recall at the chosen point

A mean recall of 0.95 can hide queries that get almost nothing right. Sweeps do not store
per-query recall, so the chosen config is rebuilt from the run's spec and measured once more
(`remeasure=True`; `rwb eval` runs store it in `per_query.parquet`)."""),
    new_code_cell("""\
pick = min(chosen, key=lambda c: c["p95_ms"])
values = run.per_query_recall(pick, remeasure=True)
where = retrieval.plots.config_label(pick)
print(f"{where}: mean {values.mean():.4f}, share of queries below the target "
      f"{(values < TARGET).mean():.1%}, worst query {values.min():.2f}")
display(retrieval.plots.per_query_recall(values, k=K, target=TARGET, config=where))"""),
    new_markdown_cell("""\
## Pick an operating point, export it

The sweep's choice is for its target. The measured points answer other targets too: here the
cheapest measured config per backend for a stricter target (point estimate on the tuning
queries, not a new sweep). Exporting writes the sweep's chosen config in the engine's own names
with its evidence; `rwb verify FILE` re-measures it."""),
    new_code_cell("""\
STRICT = 0.99
strict = run.cheapest_meeting(STRICT)
reached = [p for p in run.points() if (p.get("recall") or 0) >= STRICT]
best = max((p.get("recall") or 0 for p in run.points()), default=None)
if strict:
    display(pd.DataFrame(strict)[["label", "build", "search", "recall", "p95_ms", "qps"]])
elif reached:  # a target sweep's probes are not timed: no latency to rank them by
    labels = sorted({str(p.get("label") or p.get("backend")) for p in reached})
    print(f"{len(reached)} measured points reach {STRICT} (best recall {best:.4f}, {labels}) "
          f"but none has a latency: a target sweep times only its answers; `rwb eval` on "
          f"these configs compares them")
else:
    print(f"no measured config reaches {STRICT} (best recall {best})")"""),
    new_code_cell("""\
label = next((c["label"] for c in chosen if c["backend"] == "hnswlib"), chosen[0]["label"])
engine = "hnswlib" if label.startswith("hnswlib") else "faiss"
exported = retrieval.export(run, engine, WORK / f"tuned.{engine}.yaml", backend=label)
print(exported.path.read_text()[:900])"""),
    new_markdown_cell("""\
## Tenants: which layout, judged per tenant

A multi-tenant collection holds tenants of very different sizes, and recall averaged over all
queries hides the small ones. A `tenants:` section (docs/tenants.md) compares one shared index
with a tenant filter, one index per tenant, and flat search below a measured size crossover,
each judged **per tenant** (a tenant's recall lower bound against the target; tenants with few
queries pooled per size class). Here: 40 Zipf(1.1) tenants over 4,000 synthetic vectors."""),
    new_code_cell("""\
TSPEC = {
    "name": "nb01-tenants", "k": 10, "target_recall": 0.9,
    "dataset": {"kind": "synthetic", "n": 4000, "dim": 32, "n_queries": 240, "seed": 1},
    "indexes": [{"backend": "hnswlib", "build": {"M": 16, "ef_construction": 100},
                 "search": {"ef_search": [10, 20, 40]}}],
    "tenants": {"count": 40, "sizes": {"zipf": 1.1}, "min_queries": 5},
}
tenants_run = retrieval.sweep(TSPEC, out=WORK / "tenants", force=True)
ts = tenants_run.to_dict()
cols = ["layout", "knob", "tenant_recall_p5", "tenant_recall_worst1pct", "tenants_meeting",
        "p95_ms", "bytes_per_vector", "crossover"]
display(pd.DataFrame(ts["layouts"]).reindex(columns=cols))
print("answer by p95:", ts["answer"]["by_p95"] and ts["answer"]["by_p95"]["layout"],
      "| by bytes:", ts["answer"]["by_bytes"] and ts["answer"]["by_bytes"]["layout"])
per_tenant = pd.read_parquet(WORK / "tenants" / "tenants.parquet")
display(retrieval.plots.tenant_recall(ts, per_tenant))"""),
    new_markdown_cell("""\
## Your live collection, tuned in place (read-only)

Everything above measures a copy rwb built. A spec with a `live:` section and no `dataset`
attaches READ-ONLY to a collection you already run (docs/live.md): rwb reads the engine's own
description, computes the exact answer (the engine's exact path or a snapshot), and sweeps
only the search-time knob, paced by a budget. Here the "production" collection is an embedded
LanceDB table made with LanceDB's own client, with ids that are not row numbers; the queries
are sampled from it, so every output says "not production traffic"."""),
    new_code_cell("""\
import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import IvfPq

rng = np.random.default_rng(0)
x = rng.standard_normal((3000, 16)).astype(np.float32)
db = lancedb.connect(str(WORK / "app-db"))
table = db.create_table("items", pa.table({
    "item_id": pa.array(1_000_000 + 7 * np.arange(3000)),
    "emb": pa.FixedSizeListArray.from_arrays(pa.array(x.ravel()), 16)}), mode="overwrite")
table.create_index("emb", config=IvfPq(distance_type="l2", num_partitions=8, num_sub_vectors=4))
LIVE = {"name": "nb01-live", "k": 10, "target_recall": 0.5, "heldout_fraction": 0.0,
        "live": {"engine": "lancedb", "uri": str(WORK / "app-db"), "table": "items",
                 "vector_column": "emb", "id_column": "item_id"},
        "queries": {"sample": 40}, "budget": {"max_qps": 500}}
live_run = retrieval.sweep(LIVE, out=WORK / "live", force=True)
ls = live_run.to_dict()
print("chosen:", ls["chosen"] and ls["chosen"]["native"],
      "| not production traffic:", ls["live"]["not_production_traffic"])
display(retrieval.plots.live_recall(ls))"""),
]

NB02 = [
    new_markdown_cell("""\
# 02 - IVF nprobe and build parameters

Build parameters set what the search knob can reach and what it costs to get there: `nlist`
against `nprobe` for IVF, `M` against `ef_construction` for HNSW, with build time and memory
beside them. The surfaces come from an **eval run** (`rwb eval SPEC --out RUN`) that measured a
grid of builds; set `RWB_NOTEBOOK_RUN` to use your own, otherwise a small grid (8,000
synthetic vectors) is measured here."""),
    new_code_cell(SETUP + """
RUN = os.environ.get("RWB_NOTEBOOK_RUN")
TARGET = float(os.environ.get("RWB_NOTEBOOK_TARGET", "0.95"))"""),
    new_code_cell("""\
SPEC = '''
name: nb02-build-params
dataset: {name: synthetic-20k, n: 8000, n_queries: 150}
k: 10
warmup: 8
batch_repeats: 2
indexes:
  - backend: faiss-ivf
    build: {nlist: [16, 32, 64, 128]}
    search: {nprobe: [1, 2, 4, 8, 16]}
  - backend: hnswlib
    build: {M: [4, 8, 16], ef_construction: [16, 40, 100]}
    search: {ef_search: [16, 48]}
'''
if RUN is None:
    run = retrieval.evaluate(yaml.safe_load(SPEC), out=WORK / "nb02-eval")
else:
    run = retrieval.open_run(RUN)
K = int(run.to_dict()["k"])
points = run.points()
ivf = [p for p in points if p["backend"] == "faiss-ivf"]
hnsw = [p for p in points if p["backend"] == "hnswlib"]
print(f"{run.kind} run {run.run_id}: {len(ivf)} IVF points, {len(hnsw)} HNSW points")"""),
    new_markdown_cell("""\
## IVF: nlist x nprobe

More lists make each probe cheaper but each list a coarser neighbourhood: the nprobe that meets
the target grows with nlist. Cells meeting the target are outlined."""),
    new_code_cell("""\
display(retrieval.plots.param_surface(ivf, "build.nlist", "search.nprobe", k=K, target=TARGET,
                          title="faiss-ivf: nlist x nprobe"))"""),
    new_markdown_cell("""\
## HNSW: M x ef_construction

Left: recall at the most accurate `ef_search` measured and the cheapest p95 whose recall meets
the target; below: what the build costs (seconds, MiB)."""),
    new_code_cell("""\
display(retrieval.plots.param_surface(hnsw, "build.M", "build.ef_construction", k=K, target=TARGET,
                          title="hnswlib: M x ef_construction"))
display(retrieval.plots.build_costs(points))"""),
    new_markdown_cell("## The cheapest config meeting the target, per build"),
    new_code_cell("""\
best = run.cheapest_meeting(TARGET, per_build=True)
display(pd.DataFrame(best)[["series", "search", "recall", "p95_ms", "qps", "build_s",
                            "memory_bytes"]].sort_values("p95_ms") if best else "none")"""),
    new_markdown_cell("""\
## Filtered search: recall and latency by selectivity

Production queries carry filters. At low selectivity a graph walk with the `ef_search` that met
the target unfiltered can return far fewer matching neighbours; an exact search over the few
matching rows (pre-filter) is then cheap, and at high selectivity an unfiltered search with
over-fetch (post-filter) may win. A filtered eval measures every config per selectivity bucket
and strategy (recall under the fewer-than-k rule); the *cliff* is the selectivity below which a
strategy no longer meets the target at any measured knob. `rwb sweep --strategy target` on the
same spec picks the cheapest knob per bucket (`sweeps/filtered-synthetic.yaml`,
`sweeps/filtered-reuters.yaml`)."""),
    new_code_cell("""\
FSPEC = {
    "name": "nb02-filtered",
    "dataset": {"kind": "synthetic", "n": 5000, "dim": 32, "n_queries": 100, "n_clusters": 16,
                "attributes": True, "correlation": 1.0},
    "k": 10, "target_recall": TARGET, "warmup": 4, "batch_repeats": 1,
    "indexes": [{"backend": "hnswlib", "build": {"M": 16, "ef_construction": 64},
                 "search": {"ef_search": [16, 64, 256]}},
                {"backend": "faiss-ivf", "build": {"nlist": 64}, "search": {"nprobe": [4, 16]}}],
    "filters": {"selectivities": [0.005, 0.05, 0.5], "attribute": "clustered",
                "strategies": ["engine", "prefilter", "postfilter"], "overfetch": 8},
}
frun = retrieval.evaluate(FSPEC, out=WORK / "filtered", force=True).to_dict()
display(retrieval.plots.recall_vs_selectivity(frun))
display(retrieval.plots.p95_vs_selectivity(frun))
print("cliffs:", frun["cliff_by_strategy"])"""),
    new_markdown_cell("""\
## Segments and cold caches

Production collections are searched as many segments whose top-k are merged, and their first
queries after a restart read the index from disk. `topology: {segments: [...]}` builds the same
data as N segments and finds the cheapest knob per topology (with a per-segment rule and the
recall change of a force-merge); `cold: true` drops the index files' pages before the run and
measures the cold p99, the warm p99 and the queries until warm, then the same under RAM budgets
of 25 / 50 / 100% of the index bytes (a real cgroup memory limit on a child process where the
machine allows it, else the fadvise-window approximation; docs/topology.md)."""),
    new_code_cell("""\
TSPEC = {
    "name": "nb02-topology", "k": 10, "target_recall": TARGET, "warmup": 0,
    "dataset": {"kind": "synthetic", "n": 4000, "dim": 32, "n_queries": 100, "seed": 1},
    "indexes": [{"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40}}],
    "topology": {"segments": [1, 4, 16]},
}
trun = retrieval.sweep(TSPEC, out=WORK / "topology", force=True).to_dict()
display(retrieval.plots.recall_vs_segments(trun))
CSPEC = {
    "name": "nb02-cold", "k": 10, "target_recall": 0.9, "warmup": 0, "cold": True,
    "dataset": {"kind": "synthetic", "n": 4000, "dim": 32, "n_queries": 100, "seed": 1},
    "indexes": [{"backend": "faiss-ivf", "build": {"nlist": 32}, "search": {"nprobe": 1}}],
}
crun = retrieval.sweep(CSPEC, out=WORK / "cold", force=True).to_dict()
display(retrieval.plots.cold_curve(crun))
display(pd.DataFrame(crun["cold"])[["label", "search", "cold_p99_ms", "warm_p99_ms",
                                    "queries_to_warm", "drop_method"]])
budgets = [{"label": r["label"], **b} for r in crun["cold"] for b in r.get("budgets") or []]
display(pd.DataFrame(budgets).reindex(columns=["label", "budget", "method", "served",
                                               "cold_p99_ms", "warm_p99_ms", "why"]))
print("RAM budgets:", crun["cold_info"]["budget_method"])"""),
]

NB03 = [
    new_markdown_cell("""\
# 03 - The RAG layer

Four measurements around the index, each from a run directory (set the environment variable to
use yours) or from a small run made here on the shared data:

| part | command | variable |
|---|---|---|
| embedding batch sweep | `rwb bench embed` | `RWB_NOTEBOOK_EMBED_RUN` |
| fan-out over collections | `rwb bench fanout` | `RWB_NOTEBOOK_FANOUT_RUN` |
| rerank-depth curve | `rwb tune rerank` | `RWB_NOTEBOOK_RERANK_RUN` |
| semantic-cache threshold | `rwb tune cache` | `RWB_NOTEBOOK_CACHE_RUN` |

The small runs use a few hundred texts each (embeddings are cached in `~/.cache/rwb`); the cache
part needs a Redis with the search module (`REDIS_URL`, else one is started from the PyPI
wheels)."""),
    new_code_cell(SETUP + FROM_ENV),
    new_markdown_cell("""\
## Embedding: one text per call vs batches

Throughput against batch size, for fixed-size and length-sorted batches, with the goal line
(4.5x one text per call) and the library's `encode(batch_size=32)` for reference."""),
    new_code_cell("""\
embed = from_env("RWB_NOTEBOOK_EMBED_RUN")
if embed is None:
    res = retrieval.bench_embed({"collection": "qqp", "sample": 200,
                                 "batch_sizes": [1, 8, 32], "token_budgets": [2048],
                                 "single_limit": 40, "dtypes": ["fp32"], "warmup": 2},
                                out=WORK / "nb03-embed")
    embed = {**res.to_dict(), "rows": list(res.rows)}
print(f"best {embed['best_setting']}: {embed['speedup']:.2f}x one-at-a-time; "
      f"max abs diff batched vs single {embed['max_abs_diff']:.1e}")
display(retrieval.plots.embed_batch_sweep(embed["rows"], embed))"""),
    new_markdown_cell("""\
## Fan-out: several collections per query

Serial, thread-pool and asyncio fan-out over three collections (QQP questions, Reuters
paragraphs, SciFact abstracts), each in its own in-process index; speedup over serial (p50)."""),
    new_code_cell("""\
fanout = from_env("RWB_NOTEBOOK_FANOUT_RUN")
if fanout is None:
    fspec = {
        "name": "nb03-fanout", "k": 10, "modes": ["serial", "threads", "asyncio"],
        "warmup": 5, "queries": {"source": "scifact", "split": "test", "n": 100},
        "collections": [
            {"name": "qqp", "source": "qqp", "sample": 300, "backend": "hnswlib",
             "build": {"M": 16, "ef_construction": 100}, "search": {"ef_search": 64}},
            {"name": "reuters", "source": "reuters", "sample": 300, "backend": "faiss-hnsw",
             "build": {"M": 16, "ef_construction": 100}, "search": {"ef_search": 64}},
            {"name": "scifact", "source": "scifact", "sample": 300, "backend": "hnswlib",
             "build": {"M": 16, "ef_construction": 100}, "search": {"ef_search": 64}},
        ],
    }
    # the asyncio mode runs its own event loop: give it a thread without Jupyter's loop
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        fanout = pool.submit(retrieval.bench_fanout, fspec, out=WORK / "nb03-fanout"
                             ).result().to_dict()
print({m: round(v, 2) for m, v in fanout["speedup"].items() if v is not None})
display(retrieval.plots.fanout_speedups(fanout))"""),
    new_markdown_cell("""\
## Rerank depth

BM25 first stage on SciFact, re-scored by the packaged MiniLM as a bi-encoder: quality per depth
from one scoring pass, whole-stage latency from actual calls; the chosen depth is the smallest
within the tolerance of the best tuning quality."""),
    new_code_cell("""\
rerank = from_env("RWB_NOTEBOOK_RERANK_RUN")
if rerank is None:
    rspec = {
        "name": "nb03-rerank", "dataset": "scifact", "max_queries": 40, "seed": 0,
        "depths": [0, 5, 10, 20], "recall_k": 20, "tolerance": 0.005,
        "latency": {"sample_queries": 2, "warmup": 1, "repeats": 1},
        "router": {"enabled": False},
    }
    rerank = retrieval.tune_rerank(rspec, out=WORK / "nb03-rerank").to_dict()
print(f"chosen depth {rerank['chosen_depth']} (BM25 nDCG@10 {rerank['bm25_ndcg@10']:.4f}, "
      f"dense {rerank['dense_ndcg@10']:.4f})")
display(retrieval.plots.rerank_depth_curve(rerank))"""),
    new_markdown_cell("""\
## Semantic cache: hits and false hits against the threshold

Quora question pairs: one side stored in the cache on Redis, the other side probed. A hit on the
labelled duplicate is correct, any other hit is false. The chosen threshold is the largest whose
upper confidence bound on the tuning false-hit rate stays under the cap."""),
    new_code_cell("""\
cache = from_env("RWB_NOTEBOOK_CACHE_RUN")
if cache is None:
    cspec = {
        "name": "nb03-cache", "pairs": {"limit": 2000, "seed": 0},
        "cache": {"name": "rwb-nb03"},
        "tuning": {"max_false_hit": 0.05, "grid_step": 0.001, "max_threshold": 0.5},
        "latency": {"sizes": [1000], "queries": 50, "warmup": 5},
    }
    cache = retrieval.tune_cache(cspec, write=False).to_dict()
print(f"threshold {cache['threshold']} ({cache['threshold_unit']}): held-out hit rate "
      f"{cache['heldout_hit_rate']:.3f}, false-hit rate {cache['heldout_false_hit_rate']:.4f}")
display(retrieval.plots.cache_curve(cache))"""),
]


NB05 = [
    new_markdown_cell("""\
# 05 - The pipeline as one request, and an index under churn

Two measurements beyond one index at rest, each from a run directory (set the environment
variable to use yours) or from a small run made here:

| part | command | variable |
|---|---|---|
| pipeline profile | `rwb profile` | `RWB_NOTEBOOK_PROFILE_RUN` |
| recall under inserts and deletes | `rwb bench churn` | `RWB_NOTEBOOK_CHURN_RUN` |

The profile uses the shared data (SciFact and QQP texts, the packaged MiniLM; embeddings are
cached in `~/.cache/rwb`); the churn run uses synthetic vectors. Each small run takes well under
a minute on two cores. See `docs/profile.md` and `docs/churn.md`."""),
    new_code_cell(SETUP + FROM_ENV),
    new_markdown_cell("""\
## Pipeline profile: which stage owns the percentiles

`rwb profile` runs the queries through the whole retrieval path one request at a time, one span
per stage: query embedding, retrieval over each collection (serial here), fusion, rerank, the
BM25 fallback. Below, a trimmed `sweeps/pipeline-example.yaml` (150 texts per collection, 16
queries; the tiny cross-encoder has random weights, so it measures rerank *latency* only and the
nDCG of these small samples says nothing). Per stage: its own P50 / P95 / P99 and its share of the
end-to-end percentile along the critical path (`retrieve/<collection>` rows are inside
`retrieve`; `overhead` is what no stage accounts for)."""),
    new_code_cell("""\
PSPEC = '''
name: nb05-profile
k: 10
seed: 0
warmup: 2
queries: {source: scifact, split: test, n: 16}
embed: {model: null, runtime: torch}      # packaged MiniLM
retrieval:
  mode: serial
  timeout_s: 5.0
  collections:
    - {name: scifact, source: scifact, sample: 150, backend: hnswlib,
       build: {M: 16, ef_construction: 100}, search: {ef_search: 128}}
    - {name: qqp, source: qqp, sample: 150, backend: faiss-hnsw,
       build: {M: 16, ef_construction: 100}, search: {ef_search: 128}}
fusion: {method: rrf, rrf_k: 60}
rerank: {model: tiny, depth: 10}
bm25: {collection: scifact, min_results: 1}
remedies:
  parallel: true
  knobs: {scifact: {search: {ef_search: 32}}, qqp: {search: {ef_search: 32}}}
  rerank_depth: 5
'''
profile = from_env("RWB_NOTEBOOK_PROFILE_RUN")
if profile is None:
    profile = retrieval.profile(yaml.safe_load(PSPEC), out=WORK / "nb05-profile",
                                remedies=True, plots=False).summary
stages = pd.DataFrame([
    {"stage": s["name"], "p50_ms": s["p50_ms"], "p95_ms": s["p95_ms"], "p99_ms": s["p99_ms"],
     **{f"share_of_{q}": (s.get("shares") or {}).get(q) for q in ("p50", "p95", "p99")}}
    for s in profile["stages"]
])
display(stages.round(3))
tail = profile["tail"]
culprits = ", ".join(f"{stage} ({n})" for stage, n in tail["by_stage"].items())
print(f"the slowest {tail['frac']:.0%} of requests ({tail['n']}) were made slow by: {culprits}")
display(retrieval.plots.profile_stages(profile["stages"]))"""),
    new_markdown_cell("""\
## Remedies, each measured on the same queries

`--remedies` (`remedies=True`) applies each change in turn, cumulatively, and runs the queries
again: parallel collections, the tuned knobs, a smaller rerank depth (steps without their
setting are skipped). Nothing in the waterfall is projected: every row is a measured pass, so on
a busy machine a step can come out slower than the one before it."""),
    new_code_cell("""\
steps = [s for s in profile["remedies"]["steps"] if s.get("applied")]
display(pd.DataFrame(steps)[["step", "what", "p50_ms", "p95_ms", "p99_ms", "p95_vs_baseline"]]
        .round(3))
print("largest P95 saving per unit of quality lost:", profile["remedies"].get("best"))
display(retrieval.plots.profile_waterfall(profile["remedies"]))"""),
    new_markdown_cell("""\
## Churn: recall under inserts and deletes

An index built once and then written to drifts: deleted neighbours leave holes in an HNSW graph,
IVF centroids no longer fit the inserted rows. `rwb bench churn` replays a runbook (insert,
delete, search, maintain; big-ann-benchmarks' shape) on each config and measures, at every
search step, recall@10 against the exact top-10 of the *live* set and the recall of a fresh
build of the same parameters on that set (the control): `drift` is what the data did, `damage`
what the index did (IVF's centroids were trained on the clusters present at the start; the
graph's deleted nodes stay as holes). Each config ends with one line of advice: `holds`, a
re-tuned knob that holds the target on the churned index, vacuum or rebuild."""),
    new_code_cell("""\
# clustered drift: rows grouped by k-means cluster, the index starts on the first clusters;
# each round deletes 30% of the live ids and inserts 500 rows of clusters absent at the start
steps = [{"insert": {"start": 0, "end": 1500}}, {"search": {"control": True}}]
for i, start in enumerate((1500, 2000, 2500)):
    steps += [{"delete": {"fraction": 0.3, "seed": i}},
              {"insert": {"start": start, "end": start + 500}}, {"search": {"control": True}}]
steps += [{"maintain": {}}, {"search": {"control": True}}]
CSPEC = {
    "name": "nb05-churn",
    "dataset": {"kind": "synthetic", "n": 3000, "dim": 32, "n_queries": 100, "metric": "l2",
                "n_clusters": 16, "seed": 0},
    "k": 10, "queries": 100, "warmup": 2, "write_batch": 256, "target_recall": 0.95,
    "configs": [
        {"backend": "hnswlib", "build": {"M": 8, "ef_construction": 40},
         "search": {"ef_search": 16}},
        {"backend": "faiss-ivf", "build": {"nlist": 32}, "search": {"nprobe": 2}},
    ],
    "runbook": {"order": {"clusters": 8, "seed": 0}, "steps": steps},
}
churn = from_env("RWB_NOTEBOOK_CHURN_RUN")
if churn is None:
    churn = retrieval.bench_churn(CSPEC, out=WORK / "nb05-churn").to_dict()
rows = [{"config": c["label"], **{k: r.get(k) for k in (
            "step", "live", "recall", "recall_lower", "control_recall", "drift", "damage",
            "p99_ms")}}
        for c in churn["configs"] for r in c["steps"] if r["op"] == "search"]
display(pd.DataFrame(rows).round(4))
for c in churn["configs"]:
    print(f"{c['label']}: {c['advice']['line']}")
display(retrieval.plots.churn_recall(churn))"""),
]


def build(cells: list, name: str) -> Path:
    nb = new_notebook(cells=cells, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    nbformat.validate(nb)
    path = ROOT / name
    nbformat.write(nb, path)
    return path


def main() -> None:
    ROOT.mkdir(exist_ok=True)
    for cells, name in ((NB01, "01_ef_search_tradeoffs.ipynb"),
                        (NB02, "02_ivf_nprobe_and_build_params.ipynb"),
                        (NB03, "03_rag_layer.ipynb"),
                        (NB05, "05_pipeline_profile_and_churn.ipynb")):
        print(build(cells, name))


if __name__ == "__main__":
    main()
