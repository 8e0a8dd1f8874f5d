#!/usr/bin/env bash
# Start `scripts/prewarm_tests.py embed DIR` in the background, niced, one torch thread (the
# Makefile while it installs the rest of the venv, scripts/run_tests.sh before the lint): it
# embeds the corpora the slow tests embed into the embedding cache the test workers share, on
# the core the serial phases leave idle. One at a time: a prewarm still running is kept.
# Its pid is in .test-cache/prewarm-embed.pid, its lines in .test-cache/prewarm-embed.log.
#   bash scripts/prewarm_start.sh PYTHON EMBEDDINGS_DIR
set -euo pipefail
cd "$(dirname "$0")/.."
py=$1
dir=$2
mkdir -p .test-cache "$dir"
pidfile=.test-cache/prewarm-embed.pid
if [[ -f "$pidfile" ]]; then
  pid=$(cat "$pidfile")
  if [[ "$pid" =~ ^[0-9]+$ ]] && grep -qs prewarm_tests "/proc/$pid/cmdline"; then
    exit 0
  fi
fi
OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 \
  nohup nice -n 19 "$py" scripts/prewarm_tests.py embed "$dir" \
  >.test-cache/prewarm-embed.log 2>&1 </dev/null &
echo $! >"$pidfile"
