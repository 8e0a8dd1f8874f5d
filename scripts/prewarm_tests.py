"""Warm the caches the workers of a ``make test`` run read, on the core the serial phases leave
idle (pip install, ruff, mypy, lint-imports); scripts/run_tests.sh and the Makefile start it in
the background. Nothing here changes what a test computes: the tests read the same caches they
would otherwise fill themselves.

  python scripts/prewarm_tests.py numba DIR   compile ranx's numba functions (``cache=True``)
                                              into DIR, a NUMBA_CACHE_DIR; ``DIR/.complete``
                                              when done (tests/conftest.py copies DIR into each
                                              worker's own NUMBA_CACHE_DIR)
  python scripts/prewarm_tests.py embed DIR   embed the shipped corpora the slow tests embed
                                              (SciFact, Cranfield, QQP 5k) into DIR, the
                                              embedding cache the workers share
                                              (RWB_TEST_EMBEDDINGS_DIR), in pieces of
                                              PIECE texts stored as they are done: stopped
                                              when pytest starts (scripts/run_tests.sh), it
                                              keeps what it did, and the test that embeds the
                                              corpus embeds only the rest (the cache reuses
                                              the stored rows)
  python scripts/prewarm_tests.py keys DIR    each corpus's chunk file, whether DIR holds it
                                              and how many of its rows DIR stores (the
                                              warm-up's pieces; no model call)
  python scripts/prewarm_tests.py requirements
                                              rwb's dependencies and its ``embed`` extra, one a
                                              line (pyproject.toml; the Makefile installs them
                                              first, for ``embed``)

Progress lines go to stderr; exit 0 when a shared data folder is absent (nothing to warm).
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
log = logging.getLogger("prewarm")


def _say(msg: str) -> None:
    print(f"prewarm: {msg}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- numba (ranx)
def warm_numba(folder: Path) -> None:
    """Compile the ranx functions the suite calls through rwb (evaluate on every metric rwb
    names, RRF fusion, the paired tests of ``compare``) into ``folder``; ``.complete`` marks it
    usable."""
    folder.mkdir(parents=True, exist_ok=True)
    done = folder / ".complete"
    done.unlink(missing_ok=True)
    os.environ["NUMBA_CACHE_DIR"] = str(folder)  # before numba is imported
    import warnings

    from filelock import FileLock

    t0 = time.perf_counter()
    with FileLock(str(folder) + ".lock"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # through rwb's own wrappers: they hand ranx every doc id as a key of one width
        # (retrieval.stats.irmetrics.ranx_keys), so these are the signatures the suite uses
        from retrieval.fusion import rrf_ranx
        from retrieval.fusion_tune.judge import ranx_per_query
        from retrieval.stats.irmetrics import evaluate_rankings
        from retrieval.study.significance import compare_configs

        qrels = {f"q{i}": {f"d{j}": 1 + (i + j) % 2 for j in range(i % 3 + 1)} for i in range(6)}

        def ranks(shift: int) -> dict[str, list[str]]:
            return {q: [f"d{(j + shift) % 5}" for j in range(5)] for q in qrels}

        metrics = ["ndcg@10", "recall@100", "mrr@10", "map@100", "precision@10", "hits@10",
                   "hit_rate@10", "f1@10"]
        evaluate_rankings(qrels, ranks(0), metrics)
        evaluate_rankings(qrels, ranks(1), ["ndcg@10"])
        rrf_ranx({name: {q: [(d, 0.0) for d in docs] for q, docs in ranks(shift).items()}
                  for name, shift in (("a", 0), ("b", 1))}, 10)
        ranked = ranks(0)
        ranx_per_query(qrels, (ranked, {q: [5.0 - j for j in range(5)] for q in ranked}),
                       "ndcg@10")
        for test in ("fisher", "student", "wilcoxon"):
            compare_configs(qrels, ranks(0), ranks(1), list(qrels), metric="ndcg@10",
                            test=test, n_permutations=100)
        # the convex fusion of tune fusion, checked against ranx's min-max wsum on such keys
        from ranx import Run, fuse

        from retrieval.stats.irmetrics import RANX_KEY_WIDTH

        def keyed(shift: int) -> Run:
            return Run({q: {f"d{(j + shift) % 5:0{RANX_KEY_WIDTH - 1}d}": float(5 - j)
                            for j in range(5)} for q in qrels})

        fuse([keyed(0), keyed(1)], norm="min-max", method="wsum", params={"weights": [0.6, 0.4]})
    done.write_text(f"{sys.executable}\n")
    _say(f"numba: ranx compiled into {folder} in {time.perf_counter() - t0:.0f} s")


# --------------------------------------------------------------------------- embeddings
def _cranfield() -> list[str]:
    from retrieval.loaders.shared import load_cranfield

    return [t for t in load_cranfield().corpus.values() if t.strip()]


def _scifact() -> list[str]:
    from retrieval.loaders.shared import load_scifact

    return [t for t in load_scifact("test").corpus.values() if t.strip()]


#: what the slow tests embed: the dense first stage of a rerank sweep embeds the non-blank corpus
#: in corpus order (retrieval/rerank/firststage.py), as test_api, notebook 03, test_embed, ...
#: (SciFact) and test_export_rerank (Cranfield) do; the cuts of SciFact other files take reuse
#: its rows once it is stored (tests/conftest.py hands them out after it), so SciFact first
CORPORA: dict[str, Callable[[], list[str]]] = {"scifact": _scifact, "cranfield": _cranfield}
#: catalog datasets embedded whole (retrieval.loaders.catalog.resolve_dataset), as the tests
#: load them: the CI manifest with its base cut to 5,000 (tests/cli/test_real_vectors.py)
DATASETS: tuple[str | dict[str, Any], ...] = ({"name": "qqp-minilm-20k", "n_base": 5000},)
#: texts per stored piece of a corpus: what is lost of a piece in progress when pytest starts
#: and stops the warm-up (128 SciFact abstracts: ~11 CPU-s)
PIECE = 128


@contextmanager
def _cache_home(embeddings: Path) -> Iterator[None]:
    """rwb's cache folder for this process: a temporary one whose ``embeddings`` is
    ``embeddings`` (what the tests read), so that nothing else is left behind."""
    embeddings.mkdir(parents=True, exist_ok=True)
    home = Path(tempfile.mkdtemp(prefix="rwb-prewarm-"))
    (home / "embeddings").symlink_to(embeddings.resolve(), target_is_directory=True)
    os.environ["RWB_CACHE_DIR"] = str(home)
    os.environ["RWB_INDEX_CACHE_DIR"] = str(home / "indexes")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        yield
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _texts(name: str) -> list[str] | None:
    from retrieval.errors import DataError

    try:
        return CORPORA[name]()
    except DataError as exc:  # the shared data folder is absent here
        _say(f"{name}: skipped ({exc})")
        return None


def warm_embeddings(embeddings: Path) -> None:
    """Embed :data:`CORPORA` (in pieces of :data:`PIECE` texts, each stored when done) and
    :data:`DATASETS` (the tests' own chunks) into ``embeddings`` with the packaged model as the
    tests use it (``default_embedder()``: the same row digests); a stored chunk is a hit. A
    corpus whose whole chunk is stored is skipped."""
    import torch

    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "1") or 1))
    with _cache_home(embeddings):
        from retrieval.embed import CachedEmbedder, default_embedder
        from retrieval.errors import DataError
        from retrieval.loaders.catalog import resolve_dataset

        emb = default_embedder()
        # the same model and cache tag as the tests' embedder (same row digests), cut in
        # pieces: each piece is stored when done, so the rows embedded before pytest starts
        # (and stops this process) are kept and reused by the test that embeds the corpus
        pieces = CachedEmbedder(emb.inner, embeddings, chunk_size=PIECE)
        for name in CORPORA:
            texts = _texts(name)
            if texts is None:
                continue
            if (embeddings / emb.path_for(texts[: emb.chunk_size]).name).is_file():
                _say(f"{name}: {len(texts)} texts cached")
                continue
            t0, stored = time.perf_counter(), 0
            try:
                for start in range(0, len(texts), PIECE):
                    pieces.embed(texts[start : start + PIECE], batch_size=32)
                    stored = min(start + PIECE, len(texts))
            finally:
                _say(f"{name}: {stored} of {len(texts)} texts stored in "
                     f"{time.perf_counter() - t0:.0f} s")
        for spec in DATASETS:
            name = spec if isinstance(spec, str) else ",".join(f"{k}={v}" for k, v in spec.items())
            t0, hits, misses = time.perf_counter(), emb.hits, emb.misses
            try:
                resolve_dataset(spec)
            except DataError as exc:
                _say(f"{name}: skipped ({exc})")
                continue
            _say(f"{name}: {emb.hits - hits} chunks cached, {emb.misses - misses} embedded, in "
                 f"{time.perf_counter() - t0:.0f} s")


def show_keys(embeddings: Path) -> None:
    """Each corpus's chunk file (the key the tests' embedder computes) and whether it is there."""
    with _cache_home(embeddings):
        from retrieval.embed.cache import CachedEmbedder
        from retrieval.embed.st import SentenceTransformerEmbedder

        emb = CachedEmbedder(SentenceTransformerEmbedder())  # default_embedder's key, no load
        import numpy as np

        stored: set[bytes] = set()  # the rows of every chunk and warm-up piece in the folder
        for f in embeddings.glob("*.rows"):
            stored.update(d.tobytes() for d in np.load(f, allow_pickle=False))
        for name in CORPORA:
            texts = _texts(name)
            if texts is not None:
                path = emb.path_for(texts[: emb.chunk_size])
                rows = sum(d.tobytes() in stored for d in emb.row_digests(texts))
                print(f"{name}\t{len(texts)}\t{path.name}\t"
                      f"{'present' if (embeddings / path.name).is_file() else 'absent'}\t"
                      f"{rows} rows stored")


def requirements() -> list[str]:
    """The project's dependencies plus its ``embed`` extra (what ``embed`` imports)."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return [*project["dependencies"], *project["optional-dependencies"]["embed"]]


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(f"prewarm: stopped (signal {signum})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["numba", "embed", "keys", "requirements"])
    ap.add_argument("folder", type=Path, nargs="?")
    args = ap.parse_args(argv)
    if args.what == "requirements":
        print("\n".join(requirements()))
        return 0
    if args.folder is None:
        ap.error(f"{args.what} needs a folder")
    logging.basicConfig(level=logging.WARNING, format="prewarm: %(message)s")
    # scripts/run_tests.sh stops the embedding warm-up with SIGTERM when pytest starts: unwind
    # (the progress line in warm_embeddings' finally) instead of dying silently
    signal.signal(signal.SIGTERM, _stopped)
    sys.path.insert(0, str(ROOT))  # this checkout's retrieval, whatever the venv points at
    {"numba": warm_numba, "embed": warm_embeddings, "keys": show_keys}[args.what](args.folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
