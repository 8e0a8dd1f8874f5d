"""Processes sharing an embedding cache folder (the workers of one test run, two sweeps on the
same corpus) compute each chunk once: the one that waits on the chunk's file lock loads what
the other stored."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import numpy as np
import pytest

from retrieval.embed import CachedEmbedder


class SlowCounting:
    """A fake model: records every call in a file, takes 0.5 s, returns vectors from lengths."""

    model_id = "fake-slow"
    dim = 4

    def __init__(self, log: Path) -> None:
        self.log = log

    def embed(self, texts: list[str], batch_size: int = 32) -> np.ndarray:
        with open(self.log, "a") as fh:
            fh.write(f"{len(texts)}\n")
        time.sleep(0.5)
        return np.array([[len(t), 1, 2, 3] for t in texts], dtype=np.float32)


def _worker(cache: str, log: str, out: str) -> None:
    emb = CachedEmbedder(SlowCounting(Path(log)), cache_dir=Path(cache))  # type: ignore[arg-type]
    np.save(out, emb.embed([f"text {i}" for i in range(20)]))


@pytest.mark.model  # CachedEmbedder.embed (a fake inner model; the guard counts it)
def test_two_processes_embed_a_chunk_once(tmp_path: Path) -> None:
    ctx = mp.get_context("fork")
    log = tmp_path / "calls.txt"
    procs = [ctx.Process(target=_worker, args=(str(tmp_path / "cache"), str(log),
                                                 str(tmp_path / f"out{i}.npy")))
             for i in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert log.read_text().splitlines() == ["20"]  # one computation, not two
    a, b = (np.load(tmp_path / f"out{i}.npy") for i in range(2))
    assert np.array_equal(a, b) and a[0, 0] == len("text 0")
