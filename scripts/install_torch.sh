#!/usr/bin/env bash
# Install the CPU build of torch into the environment of PYTHON (used by `make`).
#
#   bash scripts/install_torch.sh [--dry-run] [PYTHON]      # PYTHON: default python3
#
# On Linux a plain `pip install torch` pulls the multi-GB CUDA build, so torch never comes from
# pip's default index here. The version is the `torch==` pin of scripts/constraints.txt.
#  1. a local CPU wheel: if pip finds a torch wheel for this interpreter *offline* (pip's
#     find-links, e.g. a wheel folder named in pip.conf or $PIP_FIND_LINKS; probed with
#     `pip install --dry-run --no-index`) and it is a CPU build (version `+cpu`, or any wheel
#     off Linux), that file is installed;
#  2. otherwise PyTorch's CPU index: `pip install --index-url https://download.pytorch.org/whl/cpu`
#     ($RWB_TORCH_INDEX_URL overrides the URL, e.g. for a mirror).
# --dry-run prints the decision and the command ("install_torch: <source>: <command>") and
# installs nothing.
set -euo pipefail
dry=""
if [[ "${1:-}" == "--dry-run" ]]; then
  dry=1
  shift
fi
PY=${1:-python3}
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  echo "install_torch: PYTHON must be an interpreter with pip (e.g. .venv/bin/python); received '$PY'" >&2
  exit 2
fi
here=$(cd "$(dirname "$0")" && pwd)
spec=$(grep -E '^torch==' "$here/constraints.txt" | head -n 1 || true)
spec=${spec:-torch}
index_url=${RWB_TORCH_INDEX_URL:-https://download.pytorch.org/whl/cpu}

report=$(mktemp)
trap 'rm -f "$report"' EXIT
wheel=""
if "$PY" -m pip install --dry-run --quiet --no-index --no-deps --ignore-installed \
    --report "$report" "$spec" >/dev/null 2>&1; then
  # the file pip would install, if it is a CPU build
  wheel=$("$PY" - "$report" <<'EOF'
import json
import sys
import urllib.parse
import urllib.request

item = json.load(open(sys.argv[1], encoding="utf-8"))["install"][0]
url = item["download_info"]["url"]
version = item["metadata"]["version"]
cpu = "+cpu" in version or not sys.platform.startswith("linux")
if cpu and url.startswith("file:"):
    print(urllib.request.url2pathname(urllib.parse.urlparse(url).path))
EOF
  )
fi

if [[ -n "$wheel" ]]; then
  source="local CPU wheel"
  cmd=("$PY" -m pip install -q "$wheel")
else
  source="PyTorch CPU index"
  cmd=("$PY" -m pip install -q --index-url "$index_url" "$spec")
fi
echo "install_torch: $source: ${cmd[*]}"
if [[ -n "$dry" ]]; then
  exit 0
fi
"${cmd[@]}"
