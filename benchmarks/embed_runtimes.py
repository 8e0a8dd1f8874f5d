"""Embedding runtimes on this machine (issue 14, Performance). Printed, never asserted.

The packaged MiniLM through torch fp32 (sentence-transformers), torch bf16 (where the CPU has
bf16 instructions), ONNX Runtime fp32 and dynamic int8, and OpenVINO fp32 (where installed),
each with rwb's batching settings, interleaved slice by slice in one process
(``rwb bench embed --runtimes``). "Within tolerance": recall@10 of exact search with the
runtime's vectors against torch fp32's >= 0.99 (and, on the mixed part, SciFact recall@10 >=
0.99 x fp32's).

1. Mixed-length text (a third each of QQP questions, Reuters paragraphs, SciFact abstracts):
   texts/s of the fastest runtime/setting within tolerance / texts/s of sentence-transformers
   ``encode(batch_size=32)`` fp32                                              goal >= 2.0x
2. Short texts (QQP questions): texts/s of the best batched setting within tolerance /
   texts/s of one-at-a-time torch fp32 calls                                   goal >= 4.5x
   (also printed: batched vs one-at-a-time on the same runtime, which says what limits it).

Every ratio compares settings measured in the same run. The load average is printed before
and after (a shared CPU moves the absolute figures; the ratios less).

Usage: python benchmarks/embed_runtimes.py [--short 600] [--mixed 240] [--threads N]
       [--runtimes torch,onnx,onnx-int8,openvino] [--quality-docs 300] [--rounds 1]
       [--only short|mixed]
(the defaults take about 11 minutes on 2 cores with all five runtimes; a progress bar on stderr
when it is a terminal)
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def runtimes_default() -> str:
    from retrieval.bench.embed.engines import bf16_support

    names = ["torch", "onnx", "onnx-int8"]
    try:
        import openvino  # noqa: F401

        names.append("openvino")
    except ImportError:
        pass
    if bf16_support()[0]:
        names.append("torch-bf16")
    return ",".join(names)


def bench(collection: str, sample: int, single_limit: int, budgets: list[int],
          args: argparse.Namespace, quality: str) -> list[dict[str, Any]]:
    from retrieval.bench.embed.run import run_embed_bench
    from retrieval.bench.embed.spec import EmbedBenchConfig

    cfg = EmbedBenchConfig(
        collection=collection, sample=sample, batch_sizes=[1, 8, 32, 128], token_budgets=budgets,
        single_limit=single_limit, torch_threads=args.threads, dtypes=["fp32"],
        runtimes=args.runtimes.split(","), quality=quality,  # type: ignore[arg-type]
        quality_docs=args.quality_docs,
    )
    from retrieval.cli._common import close_bar, progress_bar

    out = []
    for r in range(args.rounds):
        bar, progress = progress_bar(f"embed runtimes ({collection})", width=40)
        try:
            res = run_embed_bench(cfg, progress=progress)
        finally:
            close_bar(bar)
        out.append(res.summary)
        print(f"  round {r + 1}: load average {os.getloadavg()[0]:.2f}")
        for name, e in res.summary["runtimes"]["by_runtime"].items():
            d, q = e["drift"], e.get("quality") or {}
            extra = (f", SciFact nDCG@10 {q['ndcg@10']:.4f} recall@10 {q['recall@10']:.4f}"
                     if q else "")
            print(f"    {name:<11} best {e['best_setting']:<22} {e['texts_per_s']:7.1f} texts/s"
                  f" (call p50 {e['call_p50_ms']:.1f} ms p95 {e['call_p95_ms']:.1f} ms); single "
                  f"{e['single_texts_per_s']:6.1f}/s; 1-cos mean {d['cos_dist_mean']:.1e} max "
                  f"{d['cos_dist_max']:.1e}, recall@{d['k']} {d['recall_at_k']:.3f}{extra}; "
                  f"{'usable' if e['within_tolerance'] else 'NOT usable: ' + e['why']}")
    return out


def med(values: list[float]) -> float:
    return statistics.median(values)


def mixed_part(args: argparse.Namespace) -> None:
    print(f"\n[1] mixed-length text: {args.mixed} texts (qqp + reuters + scifact); SciFact "
          f"quality on {args.quality_docs} docs")
    runs = bench("mixed", args.mixed, min(args.mixed, 300), [4096, 8192, 16384], args,
                 "scifact")
    last = runs[-1]["runtimes"]
    f = last["fastest_within_tolerance"]
    if f.get("runtime") is None:
        print("no runtime within tolerance")
        return
    ratio = med([s["runtimes"]["fastest_within_tolerance"]["speedup_vs_library"] for s in runs])
    print(f"fastest within tolerance ({f['runtime']}, {f['setting']}) / sentence-transformers "
          f"encode(batch_size=32) fp32: {ratio:.2f}x (goal >= 2.0x) -> "
          f"{'MET' if ratio >= 2.0 else 'NOT MET'}")
    for name, e in last["by_runtime"].items():
        if not e["within_tolerance"]:
            print(f"  ({name} would give {e['speedup_vs_library']:.2f}x, outside tolerance: "
                  f"{e['why']})")
    loose = last.get("fastest_within_quality_tolerance") or {}
    if loose.get("runtime"):
        print(f"looser reading (SciFact recall@10 >= 0.99 x fp32's only): fastest "
              f"{loose['runtime']} ({loose['setting']}) {loose['speedup_vs_library']:.2f}x "
              f"encode(batch_size=32)")


def short_part(args: argparse.Namespace) -> None:
    print(f"\n[2] short texts: {args.short} QQP questions")
    runs = bench("qqp", args.short, min(args.short, 1000), [4096, 16384], args, "none")
    last = runs[-1]["runtimes"]
    f = last["fastest_within_tolerance"]
    if f.get("runtime") is None:
        print("no runtime within tolerance")
        return
    vs_torch = med([s["runtimes"]["fastest_within_tolerance"]["speedup_vs_torch_single"]
                    for s in runs])
    same = med([s["runtimes"]["fastest_within_tolerance"]["speedup_vs_single"] for s in runs])
    print(f"best batched within tolerance ({f['runtime']}, {f['setting']}) / one-at-a-time torch "
          f"fp32: {vs_torch:.2f}x (goal >= 4.5x) -> {'MET' if vs_torch >= 4.5 else 'NOT MET'}")
    e = last["by_runtime"][f["runtime"]]
    print(f"same runtime, batched / one-at-a-time: {same:.2f}x; its one-at-a-time call p50 "
          f"{e['single_call_p50_ms']:.2f} ms, batched {e['texts_per_s']:.0f} texts/s vs single "
          f"{e['single_texts_per_s']:.0f} texts/s")
    t = last["by_runtime"]["torch"]
    print(f"torch fp32: batched ({t['best_setting']}) / one-at-a-time {t['speedup_vs_single']:.2f}x"
          f" (single call p50 {t['single_call_p50_ms']:.2f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--short", type=int, default=600, help="QQP questions")
    ap.add_argument("--mixed", type=int, default=240, help="mixed-length texts")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--threads", type=int, help="threads of every runtime (default: torch's)")
    ap.add_argument("--runtimes", help="default: torch,onnx,onnx-int8[,openvino][,torch-bf16]")
    ap.add_argument("--quality-docs", type=int, default=300, help="SciFact docs (mixed part)")
    ap.add_argument("--only", choices=["short", "mixed"], help="run one part only")
    args = ap.parse_args()
    logging.basicConfig(level=logging.WARNING)
    from retrieval.bench.embed.engines import bf16_support, torch_info
    from retrieval.runs import cpu_info

    args.runtimes = args.runtimes or runtimes_default()
    cpu = cpu_info()
    print(f"CPU {cpu['model']} ({cpu['logical_cpus']} logical); torch {torch_info()}; bf16: "
          f"{bf16_support()[1]}; runtimes {args.runtimes}; load average "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.only != "short":
        mixed_part(args)
    if args.only != "mixed":
        short_part(args)
    print(f"\nload average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
