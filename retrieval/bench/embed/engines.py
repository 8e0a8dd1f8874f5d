"""Live model calls of ``rwb bench embed``: the engines (sentence-transformers, FlagEmbedding)
and the timed runs of a plan on one of them (:mod:`retrieval.timing`: gc paused, only the model
call between the clock reads). Also what the hardware offers (bf16, torch threads)."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np

from retrieval.bench.embed.plan import Plan, PlanRun, fixed_batches
from retrieval.bench.embed.spec import EmbedBenchConfig
from retrieval.embed import RuntimeEmbedder, SentenceTransformerEmbedder, resolve_model
from retrieval.embed.runtimes import Runtime, parse_runtime
from retrieval.errors import BackendError, ConfigError, DataError
from retrieval.timing import timed

log = logging.getLogger(__name__)

BF16_FLAGS = ("avx512_bf16", "amx_bf16")


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


def torch_module() -> Any:
    """``torch``, imported on first use (the [embed] extra)."""
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
        torch = torch_module()
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
            self._flag.model.to(torch_module().bfloat16)
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
        torch = torch_module()
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


class RuntimeEngine:
    """ONNX Runtime / OpenVINO through :class:`retrieval.embed.RuntimeEmbedder` (its cached
    export), with ``threads`` intra-op threads (the same count torch uses, for a fair race)."""

    def __init__(self, model: str | None, runtime: Runtime, max_seq_length: int | None = None,
                 threads: int | None = None, cache_dir: Any = None) -> None:
        self.runtime = runtime
        self.name: str = runtime.backend
        self.dtype: str = runtime.precision
        self.embedder = RuntimeEmbedder(model, runtime=runtime.name,
                                        max_seq_length=max_seq_length, threads=threads,
                                        cache_dir=cache_dir)
        self.model_id = self.embedder.model_id
        self._enc = self.embedder.encoder  # export / load now: failures come before timing

    @property
    def dim(self) -> int:
        return int(self._enc.dim)

    @property
    def max_tokens(self) -> int:
        return int(self._enc.max_tokens)

    @property
    def info(self) -> dict[str, Any]:
        return dict(self._enc.info)

    def token_lengths(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._enc.token_lengths(texts))

    def forward(self, texts: Sequence[str]) -> tuple[np.ndarray, int, int]:
        out: tuple[np.ndarray, int, int] = self._enc.forward(texts)
        return out

    def library_encode(self, texts: Sequence[str], batch_size: int) -> np.ndarray:
        return np.asarray(self.embedder.embed(list(texts), batch_size=batch_size))


def make_runtime_engine(cfg: EmbedBenchConfig, name: str) -> EmbedEngine:
    """The engine of runtime ``name`` (torch ones through sentence-transformers)."""
    rt = parse_runtime(name, where="bench embed")
    if rt.is_torch:
        return STEngine(cfg.model, rt.precision, cfg.max_seq_length)
    threads = cfg.torch_threads or int(torch_module().get_num_threads())
    return RuntimeEngine(cfg.model, rt, cfg.max_seq_length, threads)


def make_engine(cfg: EmbedBenchConfig, dtype: str) -> EmbedEngine:
    if cfg.engine == "flagembedding":
        return FlagEngine(cfg.model, dtype, cfg.flag_pooling, cfg.max_seq_length)
    return STEngine(cfg.model, dtype, cfg.max_seq_length)


def run_plan(engine: EmbedEngine, texts: Sequence[str], plan: Plan,
             progress: Callable[[int], None] | None = None) -> PlanRun:
    n = sum(len(b) for b in plan.batches)
    out = np.zeros((len(texts), engine.dim), dtype=np.float32)
    call_ms = np.zeros(len(plan.batches), dtype=np.float64)
    real = padded = 0
    cpu0 = time.process_time()
    with timed() as wall:  # gc paused for the whole plan; each call timed alone
        for j, batch in enumerate(plan.batches):
            part = [texts[i] for i in batch]
            with timed() as call:
                emb, r, p = engine.forward(part)
            call_ms[j] = call.ms
            out[list(batch)] = emb
            real += r
            padded += p
            if progress is not None:
                progress(len(batch))
    wall_s = wall.s
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
    with timed() as wall:
        emb = engine.library_encode(part, batch_size)
    wall_s = wall.s
    cpu_s = time.process_time() - cpu0
    if engine.name in ("sentence-transformers", "onnxruntime", "openvino"):
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


def warm_up(engine: EmbedEngine, texts: Sequence[str], calls: int) -> None:
    for j in range(calls):
        engine.forward(texts[j * 8 : j * 8 + 8] or texts[:8])
        engine.forward(texts[:1])


def bf16_support() -> tuple[bool, str]:
    """Whether this CPU runs bf16 natively (AVX512-BF16 or AMX-BF16 in /proc/cpuinfo)."""
    from retrieval.runs import cpu_info

    flags = set(cpu_info()["flags"])
    have = [f for f in BF16_FLAGS if f in flags]
    if have:
        return True, f"CPU flags {', '.join(have)}"
    return False, f"CPU lacks {' / '.join(BF16_FLAGS)} (bf16 would be emulated; not measured)"


def torch_info() -> dict[str, Any]:
    torch = torch_module()
    return {
        "version": torch.__version__,
        "threads": int(torch.get_num_threads()),
        "interop_threads": int(torch.get_num_interop_threads()),
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
    }


__all__ = [
    "BF16_FLAGS",
    "EmbedEngine",
    "FlagEngine",
    "RuntimeEngine",
    "STEngine",
    "bf16_support",
    "make_engine",
    "make_runtime_engine",
    "run_library",
    "run_plan",
    "torch_info",
    "torch_module",
    "warm_up",
]
