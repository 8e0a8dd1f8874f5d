"""Write the "your own data" example inputs that sweeps/byo-*.yaml read, from ../shared/data:

- ``beir-cranfield/``: a BEIR folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) of 40
  Cranfield queries, every document they judge plus others up to 400, graded qrels (gain
  = 5 - grade);
- ``pairs.jsonl``: 1,500 labelled QQP pairs (columns a, b, duplicate) to tune a cache on;
- ``other.csv``: 600 other QQP pairs (csv, true/false labels) for the transfer check;
- ``hard.tsv``: 400 QQP non-duplicates (tsv), traffic on which a cap is easily broken.

    python scripts/make_byo_examples.py [OUT]      (default: runs/byo-data in the current folder)
"""

from __future__ import annotations

import sys
from pathlib import Path

from retrieval.loaders.shared import load_cranfield, load_qqp_pairs
from retrieval.testing.byo import sample_pairs, write_beir, write_pairs


def make(out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    write_beir(load_cranfield(relevance="gain"), out / "beir-cranfield", n_queries=40,
               n_docs=400)
    pairs = load_qqp_pairs("full")
    rows = sample_pairs(pairs, 2100, seed=7)
    write_pairs(rows[:1500], out / "pairs.jsonl")
    write_pairs(rows[1500:], out / "other.csv", "csv", bool_labels=True)
    hard = [r for r in sample_pairs(pairs, 3000, seed=8) if r[2] == 0][:400]
    write_pairs(hard, out / "hard.tsv", "tsv")
    return out


def default_out() -> Path:
    """Where the examples go without an argument: ``runs/byo-data`` under the current folder
    (where the command was typed), not under the installed package."""
    return Path.cwd() / "runs" / "byo-data"


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else default_out()
    print(f"wrote {make(target)}")
