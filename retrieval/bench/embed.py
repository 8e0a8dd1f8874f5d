"""Embedding throughput benchmark: one-at-a-time calls vs batching strategies, on real text.

Settings measured on the same texts, in one process (so the ratios are comparable even when the
machine is noisy; the absolute figures are not):

- ``single``: one forward call per text (batch size 1) - the baseline of ``speedup``;
- ``batch-<b>``: batches of ``b`` texts in the order they arrive (padding to the longest);
- ``sorted-<b>``: the same after sorting the texts by token length (length bucketing);
- ``tokens-<n>``: length-sorted batches filled until ``n`` *padded* tokens (the batch's longest
  text times its size) would be exceeded - large batches of short texts, small of long ones;
- ``library-<b>``: the library's own ``encode(batch_size=b)`` (sentence-transformers sorts by
  character length internally; FlagEmbedding by token length) - the baseline a user gets today;
- each fp32 winner again with bf16 weights (``dtype`` bf16) where the CPU has bf16 instructions.

Per setting: texts/s, tokens/s (real tokens, after truncation to the model's limit), per-call
latency p50/p95 in **milliseconds** (a call is one batch: the latency a request waits when its
texts travel in that batch), padding waste (pad tokens / all tokens fed to the model, measured
from the attention masks), and the max absolute difference of every embedding component from
the one-at-a-time embedding of the same text (the check fails above ``tolerance``).

bf16 drift is reported as cosine distance ``1 - cos(fp32, bf16)`` per text (mean and max) and as
recall@10 of exact search with bf16 vectors against exact search with fp32 vectors (queries: the
first ``drift_queries`` texts of the sample; corpus: the rest).
"""

from __future__ import annotations

import logging
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import Field, field_validator

from retrieval.embed import SentenceTransformerEmbedder, check_texts, resolve_model
from retrieval.errors import BackendError, ConfigError, DataError, param_error
from retrieval.metrics import latency_summary, recall_by_id
from retrieval.params import Params

log = logging.getLogger(__name__)

Engine = Literal["sentence-transformers", "flagembedding"]
#: short collection names accepted besides the catalog's own
ALIASES = {"qqp": "qqp-questions", "reuters-paragraphs": "reuters"}
MIXED = "mixed"
MIXED_PARTS = ("qqp-questions", "reuters", "scifact")
BF16_FLAGS = ("avx512_bf16", "amx_bf16")

#: progress callback: (done, total, description)
Progress = Callable[[int, int, str], None]


class EmbedBenchConfig(Params):
    """What ``rwb bench embed`` measures (YAML or CLI flags; unknown keys are errors)."""

    collection: str = Field("qqp", description="text collection, or 'mixed' (qqp+reuters+scifact)")
    texts_file: str | None = Field(None, description="UTF-8 file, one text per line (overrides)")
    sample: int = Field(4000, ge=1, description="texts sampled (seeded) from the collection")
    seed: int = 0
    batch_sizes: list[int] = Field(default_factory=lambda: [1, 8, 32, 128], min_length=1)
    length_sorted: bool = Field(True, description="also measure length-sorted batches")
    token_budgets: list[int] = Field(default_factory=lambda: [4096, 16384])
    library_batch_size: int = Field(32, ge=1, description="the library encode() baseline")
    model: str | None = Field(None, description="local model folder (None: packaged MiniLM)")
    engine: Engine = "sentence-transformers"
    flag_pooling: Literal["cls", "mean"] = "cls"
    max_seq_length: int | None = Field(None, ge=1)
    single_limit: int | None = Field(
        1000, ge=1, description="one-at-a-time calls on at most this many texts (None: all)"
    )
    dtypes: list[Literal["fp32", "bf16"]] = Field(
        default_factory=lambda: ["fp32", "bf16"], min_length=1  # type: ignore[arg-type]
    )
    tolerance: float = Field(1e-4, gt=0, description="max abs diff batched vs single")
    drift_queries: int = Field(100, ge=1)
    drift_k: int = Field(10, ge=1)
    torch_threads: int | None = Field(None, ge=1)
    warmup: int = Field(2, ge=0, description="warm-up calls before timing")
    interleave: int = Field(
        4, ge=1, le=64, description="slices of the sample; every setting runs on a slice "
        "before the next slice starts (a change of load hits all settings alike)")

    @field_validator("batch_sizes", "token_budgets")
    @classmethod
    def _positive(cls, v: list[int]) -> list[int]:
        bad = [b for b in v if b <= 0]
        if bad:
            raise ValueError("every value must be an integer >= 1")
        return sorted(set(v))

    @field_validator("dtypes")
    @classmethod
    def _fp32_first(cls, v: list[str]) -> list[str]:
        if "fp32" not in v:
            raise ValueError("must include fp32 (bf16 is measured against it)")
        return sorted(set(v), key=["fp32", "bf16"].index)


# --------------------------------------------------------------------------- texts


def load_bench_texts(cfg: EmbedBenchConfig) -> tuple[list[str], dict[str, Any]]:
    """The texts to embed (seeded sample, in arrival order) and where they came from."""
    if cfg.texts_file is not None:
        return _texts_from_file(Path(cfg.texts_file), cfg.sample)
    from retrieval.loaders.catalog import load_text_collection

    rng = np.random.default_rng(cfg.seed)
    name = ALIASES.get(cfg.collection, cfg.collection)
    parts = MIXED_PARTS if name == MIXED else (name,)
    texts: list[str] = []
    sources = {}
    for i, part in enumerate(parts):
        n = cfg.sample // len(parts) + (1 if i < cfg.sample % len(parts) else 0)
        coll = load_text_collection(part)
        pool = [t for t in coll.corpus.values() if t.strip()]
        if n > len(pool):
            raise param_error(
                "sample", f"<= {len(pool) * len(parts)} (non-empty texts in '{part}'"
                f"{' times ' + str(len(parts)) if len(parts) > 1 else ''})", cfg.sample,
                where="bench embed",
            )
        pick = rng.permutation(len(pool))[:n]
        texts.extend(pool[j] for j in pick)
        sources[part] = {"n": n, "of": len(pool), "fingerprint": coll.fingerprint}
    if len(parts) > 1:
        order = rng.permutation(len(texts))
        texts = [texts[j] for j in order]
    return texts, {"collection": name, "sample": len(texts), "seed": cfg.seed, "parts": sources}


def _texts_from_file(path: Path, sample: int) -> tuple[list[str], dict[str, Any]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise DataError(f"texts file '{path}' does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"texts file '{path}' cannot be read as UTF-8 ({exc})") from None
    if not lines:
        raise DataError(f"texts file '{path}' is empty; expected one text per line")
    for i, line in enumerate(lines, 1):
        if not line.strip():
            raise DataError(f"texts file '{path}': line {i} is empty; every line must be a text")
    texts = lines[:sample]
    return texts, {"collection": f"file:{path}", "sample": len(texts), "lines": len(lines)}


# --------------------------------------------------------------------------- engines


class EmbedEngine(Protocol):
    """The few operations the benchmark needs from a model (one forward call per batch)."""

    name: str
    model_id: str
    dtype: str

    @property
    def dim(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def token_lengths(self, texts: Sequence[str]) -> np.ndarray: ...

    def forward(self, texts: Sequence[str]) -> tuple[np.ndarray, int, int]:
        """Embed one batch: (float32 (b, dim) unit rows, real tokens, padded tokens)."""
        ...

    def library_encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray: ...


def _torch() -> Any:
    import torch

    return torch


class STEngine:
    """sentence-transformers through :class:`retrieval.embed.SentenceTransformerEmbedder`."""

    name = "sentence-transformers"

    def __init__(self, model: str | None, dtype: str = "fp32",
                 max_seq_length: int | None = None) -> None:
        self.embedder = SentenceTransformerEmbedder(
            model, dtype=dtype, max_seq_length=max_seq_length  # type: ignore[arg-type]
        )
        self.model_id = self.embedder.model_id
        self.dtype = dtype
        self._model = self.embedder.model  # load now: a bad model fails before any timing

    @property
    def dim(self) -> int:
        return self.embedder.dim

    @property
    def max_tokens(self) -> int:
        return self.embedder.effective_max_seq_length

    def token_lengths(self, texts: Sequence[str]) -> np.ndarray:
        """Word-piece tokens per text as the model sees them (special tokens included,
        truncated to the model's limit)."""
        ids = self.embedder.tokenizer(list(texts), truncation=True,
                                      max_length=self.max_tokens)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))

    def forward(self, texts: Sequence[str]) -> tuple[np.ndarray, int, int]:
        torch = _torch()
        model = self._model
        prep = getattr(model, "preprocess", None) or model.tokenize
        with torch.inference_mode():
            features = prep(list(texts))
            mask = features["attention_mask"]
            out = model(features)["sentence_embedding"]
            out = torch.nn.functional.normalize(out.float(), p=2, dim=1)
        return out.numpy(), int(mask.sum()), int(mask.numel())

    def library_encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return np.asarray(self.embedder.embed(list(texts), batch_size=batch_size))


class FlagEngine:
    """FlagEmbedding ``FlagModel`` from a local folder (CPU, fp32 or bf16)."""

    name = "flagembedding"

    def __init__(self, model: str | None, dtype: str = "fp32", pooling: str = "cls",
                 max_seq_length: int | None = None) -> None:
        if model is None:
            raise ConfigError(
                "bench embed: engine 'flagembedding' needs a local model folder (--model PATH)"
            )
        path, self.model_id = resolve_model(model)
        self.dtype = dtype
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            from FlagEmbedding import FlagModel
        except ImportError as exc:
            raise BackendError(
                f"bench embed: FlagEmbedding is not importable ({exc}); "
                f"pip install 'retrieval-workbench[rag]'"
            ) from None
        try:
            self._flag = FlagModel(
                str(path), use_fp16=False, use_bf16=dtype == "bf16", devices="cpu",
                pooling_method=pooling, normalize_embeddings=True,
                passage_max_length=max_seq_length or 512,
            )
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise DataError(f"FlagEmbedding model at {path} could not be loaded: {first}") from exc
        self._flag.model.eval()
        if dtype == "bf16":
            self._flag.model.to(_torch().bfloat16)
        limit = int(getattr(self._flag.tokenizer, "model_max_length", 512) or 512)
        self._max = min(max_seq_length or 512, limit)

    @property
    def dim(self) -> int:
        return int(self._flag.model.config.hidden_size)

    @property
    def max_tokens(self) -> int:
        return self._max

    def token_lengths(self, texts: Sequence[str]) -> np.ndarray:
        ids = self._flag.tokenizer(list(texts), truncation=True, max_length=self._max)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))

    def forward(self, texts: Sequence[str]) -> tuple[np.ndarray, int, int]:
        torch = _torch()
        flag = self._flag
        with torch.inference_mode():
            batch = flag.tokenizer(list(texts), padding=True, truncation=True,
                                   max_length=self._max, return_tensors="pt")
            hidden = flag.model(**batch, return_dict=True).last_hidden_state
            emb = flag.pooling(hidden, batch["attention_mask"])
            emb = torch.nn.functional.normalize(emb.float(), p=2, dim=-1)
        mask = batch["attention_mask"]
        return emb.numpy(), int(mask.sum()), int(mask.numel())

    def library_encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        out = self._flag.encode(list(texts), batch_size=batch_size, max_length=self._max)
        return np.asarray(out, dtype=np.float32)


def make_engine(cfg: EmbedBenchConfig, dtype: str) -> EmbedEngine:
    if cfg.engine == "flagembedding":
        return FlagEngine(cfg.model, dtype, cfg.flag_pooling, cfg.max_seq_length)
    return STEngine(cfg.model, dtype, cfg.max_seq_length)


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True)
class Plan:
    """A batching strategy: ``batches`` are lists of text positions."""

    setting: str
    mode: Literal["single", "batch", "sorted", "tokens", "library"]
    batches: tuple[tuple[int, ...], ...]
    batch_size: int | None = None
    token_budget: int | None = None


def fixed_batches(n: int, size: int, order: np.ndarray | None = None) -> list[tuple[int, ...]]:
    idx = np.arange(n) if order is None else order
    return [tuple(int(i) for i in idx[s:s + size]) for s in range(0, n, size)]


def token_budget_batches(lengths: np.ndarray, budget: int) -> list[tuple[int, ...]]:
    """Length-sorted batches whose padded size (longest x count) stays <= ``budget`` tokens
    (a text longer than the budget travels alone)."""
    order = np.argsort(lengths, kind="stable")
    out: list[tuple[int, ...]] = []
    cur: list[int] = []
    longest = 0
    for i in order.tolist():
        length = int(lengths[i])
        if cur and max(longest, length) * (len(cur) + 1) > budget:
            out.append(tuple(cur))
            cur, longest = [], 0
        cur.append(i)
        longest = max(longest, length)
    if cur:
        out.append(tuple(cur))
    return out


def padding_waste(lengths: np.ndarray, batches: Sequence[Sequence[int]]) -> float:
    """Share of pad tokens (0..1) when every batch is padded to its longest text."""
    real = padded = 0
    for b in batches:
        ls = lengths[list(b)]
        real += int(ls.sum())
        padded += int(ls.max()) * len(b)
    return 1.0 - real / padded if padded else 0.0


def make_plans(cfg: EmbedBenchConfig, n: int, lengths: np.ndarray) -> list[Plan]:
    plans = []
    n_single = n if cfg.single_limit is None else min(n, cfg.single_limit)
    plans.append(Plan("single", "single", tuple(fixed_batches(n_single, 1)), batch_size=1))
    sorted_idx = np.argsort(lengths, kind="stable")
    for b in cfg.batch_sizes:
        if b == 1:
            continue
        plans.append(Plan(f"batch-{b}", "batch", tuple(fixed_batches(n, b)), batch_size=b))
        if cfg.length_sorted:
            plans.append(Plan(f"sorted-{b}", "sorted", tuple(fixed_batches(n, b, sorted_idx)),
                              batch_size=b))
    for t in cfg.token_budgets:
        plans.append(Plan(f"tokens-{t}", "tokens", tuple(token_budget_batches(lengths, t)),
                          token_budget=t))
    return plans


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class PlanRun:
    """One setting measured. Times: ``wall_s`` seconds, ``call_ms`` milliseconds per call."""

    plan: Plan
    dtype: str
    embeddings: np.ndarray
    call_ms: np.ndarray
    wall_s: float
    real_tokens: int
    padded_tokens: int
    cpu_s: float


def run_plan(engine: EmbedEngine, texts: Sequence[str], plan: Plan,
             progress: Callable[[int], None] | None = None) -> PlanRun:
    n = sum(len(b) for b in plan.batches)
    out = np.zeros((len(texts), engine.dim), dtype=np.float32)
    call_ms = np.zeros(len(plan.batches), dtype=np.float64)
    real = padded = 0
    cpu0 = time.process_time()
    t0 = time.perf_counter_ns()
    for j, batch in enumerate(plan.batches):
        s = time.perf_counter_ns()
        emb, r, p = engine.forward([texts[i] for i in batch])
        call_ms[j] = (time.perf_counter_ns() - s) / 1e6
        out[list(batch)] = emb
        real += r
        padded += p
        if progress is not None:
            progress(len(batch))
    wall_s = (time.perf_counter_ns() - t0) / 1e9
    cpu_s = time.process_time() - cpu0
    log.debug("%s (%s): %d texts in %.2f s", plan.setting, engine.dtype, n, wall_s)
    return PlanRun(plan, engine.dtype, out, call_ms, wall_s, real, padded, cpu_s)


def run_library(engine: EmbedEngine, texts: Sequence[str], batch_size: int,
                lengths: np.ndarray, rows: np.ndarray | None = None) -> PlanRun:
    """The library's own ``encode`` on ``texts[rows]`` (default all), timed as one call;
    padding modelled from its sort order (sentence-transformers: descending character length;
    FlagEmbedding: descending tokens). Embeddings land at their rows of an (n, dim) matrix."""
    idx = np.arange(len(texts)) if rows is None else np.asarray(rows)
    part = [texts[int(i)] for i in idx]
    cpu0 = time.process_time()
    t0 = time.perf_counter_ns()
    emb = engine.library_encode(part, batch_size)
    wall_s = (time.perf_counter_ns() - t0) / 1e9
    cpu_s = time.process_time() - cpu0
    if engine.name == "sentence-transformers":
        order = idx[np.argsort([-len(t) for t in part], kind="stable")]
    else:
        order = idx[np.argsort(-lengths[idx], kind="stable")]
    batches = fixed_batches(len(idx), batch_size, order)
    real = int(lengths[idx].sum())
    padded = sum(int(lengths[list(b)].max()) * len(b) for b in batches)
    n_calls = len(batches)
    plan = Plan(f"library-{batch_size}", "library", tuple(batches), batch_size=batch_size)
    call_ms = np.full(n_calls, wall_s * 1e3 / max(n_calls, 1))  # mean only: not per call
    out = np.zeros((len(texts), engine.dim), dtype=np.float32)
    out[idx] = emb
    return PlanRun(plan, engine.dtype, out, call_ms, wall_s, real, padded, cpu_s)


def merge_runs(runs: Sequence[PlanRun]) -> PlanRun:
    """The runs of one setting on disjoint slices as one run (times and tokens summed)."""
    first = runs[0]
    if len(runs) == 1:
        return first
    plan = Plan(first.plan.setting, first.plan.mode,
                tuple(b for r in runs for b in r.plan.batches),
                batch_size=first.plan.batch_size, token_budget=first.plan.token_budget)
    emb = np.zeros_like(first.embeddings)
    for r in runs:
        emb += r.embeddings  # disjoint rows: each run fills only its own
    return PlanRun(plan, first.dtype, emb, np.concatenate([r.call_ms for r in runs]),
                   sum(r.wall_s for r in runs), sum(r.real_tokens for r in runs),
                   sum(r.padded_tokens for r in runs), sum(r.cpu_s for r in runs))


def slice_plans(cfg: EmbedBenchConfig, lengths: np.ndarray,
                rows: np.ndarray) -> list[Plan]:
    """:func:`make_plans` for the texts at ``rows`` (batches hold global positions)."""
    limit = None if cfg.single_limit is None else -(-cfg.single_limit // cfg.interleave)
    local = make_plans(cfg.model_copy(update={"single_limit": limit}), len(rows),
                       lengths[rows])
    return [Plan(p.setting, p.mode, tuple(tuple(int(rows[i]) for i in b) for b in p.batches),
                 batch_size=p.batch_size, token_budget=p.token_budget) for p in local]


def warm_up(engine: EmbedEngine, texts: Sequence[str], calls: int) -> None:
    for j in range(calls):
        engine.forward(texts[j * 8 : j * 8 + 8] or texts[:8])
        engine.forward(texts[:1])


# --------------------------------------------------------------------------- checks


def max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """Largest absolute difference of any component (float)."""
    if a.shape != b.shape:
        raise DataError(f"embeddings to compare have shapes {a.shape} and {b.shape}")
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


@dataclass(frozen=True)
class AgreementCheck:
    """Batched vs one-at-a-time embeddings of the same texts (max abs component difference)."""

    max_abs_diff: float
    tolerance: float
    worst_setting: str
    n_texts: int

    @property
    def ok(self) -> bool:
        return math.isfinite(self.max_abs_diff) and self.max_abs_diff <= self.tolerance

    def message(self) -> str:
        verdict = "agree" if self.ok else "DISAGREE"
        return (
            f"batched and single embeddings {verdict}: max abs diff {self.max_abs_diff:.3g} "
            f"({self.worst_setting}, {self.n_texts} texts; tolerance {self.tolerance:g})"
        )


def check_agreement(single: np.ndarray, batched: dict[str, np.ndarray],
                    tolerance: float) -> AgreementCheck:
    """Compare each setting's embeddings (first ``len(single)`` rows) with ``single``."""
    worst, worst_name = 0.0, "-"
    for name, emb in batched.items():
        d = max_abs_diff(single, emb[: len(single)])
        if not math.isfinite(d) or d > worst or worst_name == "-":
            worst, worst_name = (d if math.isfinite(d) else math.inf), name
    return AgreementCheck(worst, tolerance, worst_name, len(single))


def drift(fp32: np.ndarray, other: np.ndarray, n_queries: int, k: int) -> dict[str, float]:
    """Cosine distance (1 - cos, 0..2) per text between two embeddings of the same texts, and
    recall@k of exact search with ``other`` vectors against exact search with ``fp32``."""
    a = fp32 / np.linalg.norm(fp32, axis=1, keepdims=True)
    b = other / np.linalg.norm(other, axis=1, keepdims=True)
    cos_dist = 1.0 - np.sum(a * b, axis=1)
    out = {
        "cos_dist_mean": float(cos_dist.mean()),
        "cos_dist_max": float(cos_dist.max()),
        "max_abs_diff": max_abs_diff(fp32, other),
    }
    nq = min(n_queries, len(a) // 2)
    k = min(k, len(a) - nq)
    if nq >= 1 and k >= 1:
        def top(x: np.ndarray) -> np.ndarray:
            sims = x[:nq] @ x[nq:].T
            part = np.argpartition(-sims, k - 1, axis=1)[:, :k]
            order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1)
            return np.take_along_axis(part, order, axis=1).astype(np.int64)

        rec = recall_by_id(top(b), top(a), k)
        out.update({"recall_at_k": float(rec.mean()), "recall_min": float(rec.min()),
                    "k": k, "n_queries": nq, "n_corpus": len(a) - nq})
    return out


# --------------------------------------------------------------------------- the bench


def bf16_support() -> tuple[bool, str]:
    """Whether this CPU runs bf16 natively (AVX512-BF16 or AMX-BF16 in /proc/cpuinfo)."""
    from retrieval.store import cpu_info

    flags = set(cpu_info()["flags"])
    have = [f for f in BF16_FLAGS if f in flags]
    if have:
        return True, f"CPU flags {', '.join(have)}"
    return False, f"CPU lacks {' / '.join(BF16_FLAGS)} (bf16 would be emulated; not measured)"


def torch_info() -> dict[str, Any]:
    torch = _torch()
    return {
        "version": torch.__version__,
        "threads": int(torch.get_num_threads()),
        "interop_threads": int(torch.get_num_interop_threads()),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
    }


@dataclass(frozen=True)
class EmbedBenchResult:
    rows: list[dict[str, Any]]
    summary: dict[str, Any]
    agreement: AgreementCheck
    info: dict[str, Any] = field(default_factory=dict)


def _row(run: PlanRun, single_rate: float | None) -> dict[str, Any]:
    n = sum(len(b) for b in run.plan.batches)
    lat = latency_summary(run.call_ms)
    texts_per_s = n / run.wall_s if run.wall_s > 0 else math.inf
    return {
        "setting": run.plan.setting if run.dtype == "fp32" else f"{run.plan.setting}@{run.dtype}",
        "mode": run.plan.mode,
        "dtype": run.dtype,
        "batch_size": run.plan.batch_size,
        "token_budget": run.plan.token_budget,
        "n_texts": n,
        "n_calls": len(run.plan.batches),
        "mean_batch": n / max(len(run.plan.batches), 1),
        "wall_s": run.wall_s,
        "cpu_s": run.cpu_s,
        "texts_per_s": texts_per_s,
        "tokens_per_s": run.real_tokens / run.wall_s if run.wall_s > 0 else math.inf,
        "call_p50_ms": lat["p50_ms"],
        "call_p95_ms": lat["p95_ms"],
        "padding_waste": 1.0 - run.real_tokens / run.padded_tokens if run.padded_tokens else 0.0,
        "speedup_vs_single": texts_per_s / single_rate if single_rate else None,
        "latency_measured": run.plan.mode != "library",
    }


def _ticker(tick: Callable[[int, str], None], desc: str) -> Callable[[int], None]:
    return lambda k: tick(k, desc)


def run_embed_bench(cfg: EmbedBenchConfig, texts: Sequence[str] | None = None,
                    progress: Progress | None = None) -> EmbedBenchResult:
    """Run every setting of ``cfg`` on ``texts`` (default: :func:`load_bench_texts`)."""
    if cfg.engine == "flagembedding" and cfg.model is None:
        raise ConfigError(
            "bench embed: engine 'flagembedding' needs a local model folder (--model PATH)"
        )
    resolve_model(cfg.model)  # an unknown model fails here, before any text is loaded
    data_info: dict[str, Any]
    if texts is None:
        texts, data_info = load_bench_texts(cfg)
    else:
        data_info = {"collection": "given", "sample": len(texts)}
    texts = check_texts(texts, where="bench embed")
    torch = _torch()
    if cfg.torch_threads is not None:
        torch.set_num_threads(cfg.torch_threads)
    engine = make_engine(cfg, "fp32")
    lengths = engine.token_lengths(texts)
    plans = make_plans(cfg, len(texts), lengths)  # for the progress total only
    total = sum(sum(len(b) for b in p.batches) for p in plans) + len(texts)
    done = 0

    def tick(k: int, desc: str = "") -> None:
        nonlocal done
        done += k
        if progress is not None:
            progress(done, total, desc)

    warm_up(engine, texts, cfg.warmup)
    slices = [r for r in np.array_split(np.arange(len(texts)), min(cfg.interleave, len(texts)))
              if len(r)]
    parts: dict[str, list[PlanRun]] = {}
    for rows_ in slices:  # every setting on this slice before the next slice
        for plan in slice_plans(cfg, lengths, rows_):
            parts.setdefault(plan.setting, []).append(
                run_plan(engine, texts, plan, progress=_ticker(tick, plan.setting)))
        lib_part = run_library(engine, texts, cfg.library_batch_size, lengths, rows_)
        parts.setdefault(lib_part.plan.setting, []).append(lib_part)
        tick(len(rows_), lib_part.plan.setting)
    merged = {name: merge_runs(v) for name, v in parts.items()}
    lib = merged.pop(f"library-{cfg.library_batch_size}")
    runs = merged
    single = runs["single"]
    single_rows = np.array([i for b in single.plan.batches for i in b], dtype=np.int64)
    single_rate = len(single_rows) / single.wall_s
    agreement = check_agreement(
        single.embeddings[single_rows],
        {name: r.embeddings[single_rows] for name, r in runs.items() if name != "single"}
        | {lib.plan.setting: lib.embeddings[single_rows]},
        cfg.tolerance,
    )
    rows = [_row(r, single_rate) for r in runs.values()] + [
        _row(lib, single_rate)
    ]
    batched = [r for r in rows if r["mode"] in ("batch", "sorted", "tokens")]
    best = max(batched, key=lambda r: r["texts_per_s"]) if batched else rows[0]
    lib_row = rows[-1]
    summary: dict[str, Any] = {
        "model_id": engine.model_id,
        "engine": engine.name,
        "dim": engine.dim,
        "max_tokens": engine.max_tokens,
        "n_texts": len(texts),
        "tokens": {
            "mean": float(lengths.mean()),
            "p50": float(np.percentile(lengths, 50)),
            "p95": float(np.percentile(lengths, 95)),
            "max": int(lengths.max()),
            "at_limit_share": float((lengths >= engine.max_tokens).mean()),
        },
        "single_texts_per_s": single_rate,
        "best_setting": best["setting"],
        "best_texts_per_s": best["texts_per_s"],
        "speedup": best["texts_per_s"] / single_rate,
        "library_setting": lib_row["setting"],
        "library_texts_per_s": lib_row["texts_per_s"],
        "speedup_vs_library": best["texts_per_s"] / lib_row["texts_per_s"],
        "max_abs_diff": agreement.max_abs_diff,
        "tolerance": agreement.tolerance,
        "agree": agreement.ok,
        "worst_setting": agreement.worst_setting,
    }
    summary["bf16"] = _bf16(cfg, texts, engine, runs[best["setting"]], slices, rows,
                            single_rate, tick)
    if summary["bf16"].get("speedup_vs_fp32_best"):
        # bf16 vs fp32 best (same pass, interleaved) x fp32 best vs library (first pass)
        summary["speedup_vs_library_bf16"] = (
            summary["bf16"]["speedup_vs_fp32_best"] * summary["speedup_vs_library"]
        )
    info = {"data": data_info, "torch": torch_info(), "config": cfg.model_dump(mode="json")}
    return EmbedBenchResult(rows=rows, summary=summary, agreement=agreement, info=info)


def _bf16(cfg: EmbedBenchConfig, texts: Sequence[str], fp32: EmbedEngine, best: PlanRun,
          slices: Sequence[np.ndarray], rows: list[dict[str, Any]], single_rate: float,
          tick: Callable[..., None]) -> dict[str, Any]:
    """The best fp32 setting again in bf16, interleaved slice by slice with a fresh fp32 pass
    of the same batches (the ratio compares like with like); drift vs the fp32 embeddings."""
    if "bf16" not in cfg.dtypes:
        return {"measured": False, "reason": "not requested"}
    ok, reason = bf16_support()
    if not ok:
        return {"measured": False, "reason": reason}
    engine = make_engine(cfg, "bf16")
    warm_up(engine, texts, max(cfg.warmup, 1))
    by_slice = [set(r.tolist()) for r in slices]
    bf_parts, fp_parts = [], []
    for members in by_slice:
        batches = tuple(b for b in best.plan.batches if b and b[0] in members)
        plan = Plan(best.plan.setting, best.plan.mode, batches,
                    batch_size=best.plan.batch_size, token_budget=best.plan.token_budget)
        fp_parts.append(run_plan(fp32, texts, plan))
        bf_parts.append(run_plan(engine, texts, plan))
        tick(0, "bf16")
    run, ref = merge_runs(bf_parts), merge_runs(fp_parts)
    row = _row(run, single_rate)
    rows.append(row)
    d = drift(best.embeddings, run.embeddings, cfg.drift_queries, cfg.drift_k)
    fp_rate = len(texts) / ref.wall_s
    return {
        "measured": True,
        "reason": reason,
        "setting": row["setting"],
        "texts_per_s": row["texts_per_s"],
        "fp32_texts_per_s_same_pass": fp_rate,
        "speedup_vs_fp32_best": row["texts_per_s"] / fp_rate,
        "drift": d,
    }


__all__ = [
    "AgreementCheck",
    "EmbedBenchConfig",
    "EmbedBenchResult",
    "Plan",
    "bf16_support",
    "check_agreement",
    "drift",
    "fixed_batches",
    "load_bench_texts",
    "make_plans",
    "max_abs_diff",
    "merge_runs",
    "padding_waste",
    "run_embed_bench",
    "token_budget_batches",
]


# --------------------------------------------------------------------------- configs, runs


def load_embed_config(path: str | Path | None, **overrides: Any) -> EmbedBenchConfig:
    """A config from a YAML file (optional) with non-None ``overrides`` on top; errors name the
    file (or "bench embed" for flags) and the field."""
    import yaml

    from retrieval.params import validate_params

    data: dict[str, Any] = {}
    where = "bench embed"
    if path is not None:
        p = Path(path)
        where = str(p)
        try:
            loaded = yaml.safe_load(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file '{p}' does not exist") from None
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{p}: cannot read as YAML ({type(exc).__name__})") from None
        if not isinstance(loaded, dict):
            raise ConfigError(f"{p}: an embed bench config must be a YAML mapping; received "
                              f"{type(loaded).__name__}")
        data.update(loaded)
    given = {k: v for k, v in overrides.items() if v is not None}
    if given and path is not None:
        where = f"{where} (with command-line overrides)"
    data.update(given)
    return validate_params(EmbedBenchConfig, data, where=where)


def write_embed_run(result: EmbedBenchResult, out: str | Path | None) -> Any:
    """Run directory: manifest.json (versions, git sha, CPU flags incl. AMX/AVX-512, torch
    threads, seed, config), results.parquet (one tidy row per setting), summary.json."""
    from retrieval.bench.summary import EmbedBenchSummary
    from retrieval.store import RunDir, RunKind

    run = RunDir.create(out, RunKind.BENCH_EMBED)
    ok, reason = bf16_support()
    run.write_manifest(
        kind=RunKind.BENCH_EMBED,
        config=result.info.get("config"),
        data=result.info.get("data"),
        torch=result.info.get("torch"),
        seeds={"sample": result.info.get("config", {}).get("seed")},
        bf16={"supported": ok, "why": reason},
    )
    run.write_table("results.parquet", result.rows)
    run.write_summary(EmbedBenchSummary.model_validate({**result.summary, "rows": result.rows}))
    return run
