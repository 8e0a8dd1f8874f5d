"""Inference over an exported model: the model folder's tokenizer, an ONNX Runtime or OpenVINO
session over the cached ``.onnx`` file (:mod:`.export`), and batching like
``SentenceTransformer.encode`` (texts sorted by descending character length, batches of
``batch_size``, outputs back in input order). Outputs are float32 ``(n, dim)`` unit rows (the
graph holds the model's pooling and normalisation).

Threads: ``threads`` intra-op threads (None: the library's default, all cores). OpenVINO is
pinned to f32 inference precision for the ``openvino`` runtime (on AMX / AVX512-BF16 CPUs it
would silently run bf16 otherwise).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from retrieval.embed.runtimes.export import ExportInfo, exported_model
from retrieval.embed.runtimes.names import Runtime
from retrieval.errors import BackendError, DataError

log = logging.getLogger(__name__)

OUTPUT = "sentence_embedding"


def model_max_seq_length(model_path: Path) -> int:
    """The model folder's own token limit (sentence_bert_config.json; 512 if it has none)."""
    try:
        cfg = json.loads((model_path / "sentence_bert_config.json").read_text())
        return int(cfg.get("max_seq_length") or 512)
    except (OSError, ValueError, TypeError):
        return 512


class _Ort:
    def __init__(self, file: Path, threads: int | None) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if threads is not None:
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(file), sess_options=opts,
                                            providers=["CPUExecutionProvider"])
        self.inputs = [i.name for i in self.session.get_inputs()]
        out = next((o for o in self.session.get_outputs() if o.name == OUTPUT), None)
        if out is None:
            raise BackendError(f"{file} has no output '{OUTPUT}'")
        self.dim = int(out.shape[-1])
        self.info = {"library": "onnxruntime", "version": ort.__version__,
                     "providers": self.session.get_providers(), "threads": threads}

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        return np.asarray(self.session.run([OUTPUT], feeds)[0])


class _OpenVINO:
    def __init__(self, file: Path, threads: int | None) -> None:
        import openvino as ov

        core = ov.Core()
        model = core.read_model(str(file))
        config: dict[str, Any] = {"INFERENCE_PRECISION_HINT": "f32"}
        if threads is not None:
            config["INFERENCE_NUM_THREADS"] = threads
        self.compiled = core.compile_model(model, "CPU", config)
        self.request = self.compiled.create_infer_request()
        self.inputs = [i.get_any_name() for i in model.inputs]
        out = next(o for o in self.compiled.outputs if OUTPUT in o.get_names())
        self.output = out
        self.dim = int(out.get_partial_shape()[-1].get_length())
        self.info = {"library": "openvino", "version": ov.get_version(), "device": "CPU",
                     "inference_precision": "f32", "threads": threads}

    def run(self, feeds: dict[str, np.ndarray]) -> np.ndarray:
        res = self.request.infer(feeds)
        return np.array(res[self.output])


class ExportedEncoder:
    """One model folder run through an exported file on ``runtime`` (not torch)."""

    def __init__(self, model_path: Path, model_id: str, runtime: Runtime, *,
                 max_seq_length: int | None = None, threads: int | None = None,
                 cache_root: Path | None = None) -> None:
        if runtime.is_torch or runtime.export_kind is None:
            raise DataError(f"ExportedEncoder runs exported files; {runtime.name} is torch")
        self.model_path = Path(model_path)
        self.model_id = model_id
        self.runtime = runtime
        self.threads = threads
        self.max_tokens = min(max_seq_length or 10**9, model_max_seq_length(self.model_path))
        t0 = time.perf_counter()
        os.environ["HF_HUB_OFFLINE"] = "1"
        try:
            from transformers import AutoTokenizer
        except ImportError as exc:
            raise BackendError(f"embedder: transformers is not installed ({exc})") from None
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.model_path),
                                                       local_files_only=True)
        self.export: ExportInfo = exported_model(self.model_path, model_id, runtime.export_kind,
                                                 cache_root=cache_root)
        self._engine = self._open()
        self._lock = threading.Lock()
        self.dim = self._engine.dim
        self.load_s = time.perf_counter() - t0
        log.info("loaded %s on %s (%s, export %s) in %.2f s", model_id, runtime.name,
                 self.export.path.name, "reused" if self.export.reused else "made", self.load_s)

    def _open(self) -> _Ort | _OpenVINO:
        cls = _OpenVINO if self.runtime.backend == "openvino" else _Ort
        try:
            return cls(self.export.path, self.threads)
        except ImportError as exc:
            raise BackendError(
                f"runtime {self.runtime.name}: the package '{self.runtime.package}' is not "
                f"installed (pip install {self.runtime.package}): {exc}"
            ) from None
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise BackendError(
                f"runtime {self.runtime.name}: cannot load {self.export.path}: {first}"
            ) from exc

    @property
    def info(self) -> dict[str, Any]:
        return {**self._engine.info, "runtime": self.runtime.name, "file": str(self.export.path),
                "export_reused": self.export.reused, "export_s": self.export.seconds,
                "export_versions": self.export.versions}

    def token_lengths(self, texts: Sequence[str], truncate: bool = True) -> np.ndarray:
        """Word-piece tokens per text incl. special tokens (truncated to ``max_tokens``)."""
        kw: dict[str, Any] = ({"truncation": True, "max_length": self.max_tokens} if truncate
                              else {"truncation": False})
        ids = self.tokenizer(list(texts), add_special_tokens=True, **kw)["input_ids"]
        return np.fromiter((len(x) for x in ids), dtype=np.int64, count=len(ids))

    def forward(self, texts: Sequence[str]) -> tuple[np.ndarray, int, int]:
        """One batch: (float32 (b, dim) rows, real tokens, padded tokens)."""
        enc = self.tokenizer(list(texts), padding=True, truncation=True,
                             max_length=self.max_tokens, return_tensors="np")
        feeds = {name: np.ascontiguousarray(enc[name], dtype=np.int64)
                 for name in self._engine.inputs}
        mask = enc["attention_mask"]
        with self._lock:  # one inference request / session call at a time per encoder
            out = self._engine.run(feeds)
        return np.ascontiguousarray(out, dtype=np.float32), int(mask.sum()), int(mask.size)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """All texts in batches of ``batch_size`` after sorting by descending character length
        (as sentence-transformers does); rows come back in input order."""
        order = np.argsort([-len(t) for t in texts], kind="stable")
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for s in range(0, len(order), batch_size):
            idx = order[s : s + batch_size]
            out[idx] = self.forward([texts[int(i)] for i in idx])[0]
        return out


__all__ = ["OUTPUT", "ExportedEncoder", "model_max_seq_length"]
