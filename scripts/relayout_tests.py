"""Lay the tests out like the package (issue 29 item 4): one folder per package of retrieval/
(``tests/tune``, ``tests/engines``, ``tests/live``, ...), the engines' tests beside each other in
``tests/engines``, the flat modules of retrieval/ in ``tests/core``, the project's own checks
(docs, packaging, wheel, notebooks) in ``tests/project``. The cost tier is a marker, not a folder
(``services``, ``model``, ``slow``; ``make test-unit`` is ``-m "not services and not model and
not slow"`` over the whole of tests/).

Idempotent: a test file still in one of the old tier folders (``tests/unit``, ``integration``,
``e2e``, ``contract``) is moved with ``git mv`` to its place (the table below, else the package
it imports most), and every reference to its old path (``tests/unit/test_x.py`` in docs, code
and scripts; ``tests.integration.test_x`` in imports) is rewritten. Files already in a package
folder are left alone.

    python scripts/relayout_tests.py [--dry-run]
"""

from __future__ import annotations

import argparse
import ast
import collections
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OLD_TIERS = ("unit", "integration", "e2e", "contract")
#: retrieval/ modules that are not packages: their tests live in tests/core
FLAT = "core"
#: old path (under tests/) -> new path (under tests/); names that collided across tiers renamed
PLACES: dict[str, str] = {
    "integration/test_fusion_sparse_leg.py": "fusion_tune/test_fusion_sparse_leg.py",
    "integration/test_engine_hybrid.py": "engines/test_engine_hybrid.py",
    "integration/test_portable_exports.py": "exporting/test_portable_exports.py",
    "integration/test_tenants_engines.py": "tune/test_tenants_engines.py",
    "integration/test_tenants_export.py": "exporting/test_tenants_export.py",
    "integration/test_topology_export.py": "exporting/test_topology_export.py",
    "unit/test_low_items.py": "core/test_low_items.py",
    "e2e/test_api.py": "api/test_api.py",
    "unit/test_api_admin.py": "api/test_api_admin.py",
    "unit/test_overrides.py": "api/test_overrides.py",
    "e2e/test_cli_bench.py": "bench/test_cli_bench.py",
    "e2e/test_cli_load.py": "bench/test_cli_load.py",
    "unit/test_embed_bench.py": "bench/test_embed_bench.py",
    "unit/test_fanout.py": "bench/test_fanout.py",
    "unit/test_fanout_bench.py": "bench/test_fanout_bench.py",
    "integration/test_fanout_milvus.py": "bench/test_fanout_milvus.py",
    "integration/test_fanout_servers.py": "bench/test_fanout_servers.py",
    "integration/test_load_engines.py": "bench/test_load_engines.py",
    "unit/test_load_logic.py": "bench/test_load_logic.py",
    "unit/test_load_schedule.py": "bench/test_load_schedule.py",
    "integration/test_load_servers.py": "bench/test_load_servers.py",
    "unit/test_load_spec_bounds.py": "bench/test_load_spec_bounds.py",
    "integration/test_load_writes.py": "bench/test_load_writes.py",
    "integration/test_byo_cache.py": "cache/test_byo_cache.py",
    "unit/test_cache_retry.py": "cache/test_cache_retry.py",
    "integration/test_cache_tune.py": "cache/test_cache_tune.py",
    "unit/test_cache_tune_logic.py": "cache/test_cache_tune_logic.py",
    "integration/test_cache_tune_outage.py": "cache/test_cache_tune_outage.py",
    "integration/test_semcache.py": "cache/test_semcache.py",
    "unit/test_thresholds.py": "cache/test_thresholds.py",
    "unit/test_churn.py": "churn/test_churn.py",
    "unit/test_cli_datasets.py": "cli/test_cli_datasets.py",
    "e2e/test_cli_eval.py": "cli/test_cli_eval.py",
    "unit/test_error_wording.py": "cli/test_error_wording.py",
    "unit/test_phase_progress.py": "cli/test_phase_progress.py",
    "e2e/test_progress.py": "cli/test_progress.py",
    "unit/test_progress_lines.py": "cli/test_progress_lines.py",
    "e2e/test_real_vectors.py": "cli/test_real_vectors.py",
    "unit/test_unusable_inputs.py": "cli/test_unusable_inputs.py",
    "integration/test_caller_ids.py": "core/test_caller_ids.py",
    "unit/test_evaluate.py": "core/test_evaluate.py",
    "unit/test_evaluate_timing.py": "core/test_evaluate_timing.py",
    "unit/test_fusion.py": "core/test_fusion.py",
    "unit/test_ids.py": "core/test_ids.py",
    "unit/test_redact.py": "core/test_redact.py",
    "integration/test_embed.py": "embed/test_embed.py",
    "unit/test_embed_cache_lock.py": "embed/test_embed_cache_lock.py",
    "integration/test_embed_runtimes.py": "embed/test_embed_runtimes.py",
    "contract/test_conformance.py": "engines/test_conformance.py",
    "contract/test_conformance_engines.py": "engines/test_conformance_engines.py",
    "contract/test_conformance_milvus.py": "engines/test_conformance_milvus.py",
    "contract/test_conformance_pgvector.py": "engines/test_conformance_pgvector.py",
    "unit/test_conformance_suite.py": "engines/test_conformance_suite.py",
    "unit/test_derived_hnsw.py": "engines/test_derived_hnsw.py",
    "integration/test_engine_backends.py": "engines/test_engine_backends.py",
    "integration/test_engine_plugin.py": "engines/test_engine_plugin.py",
    "unit/test_inprocess_backends.py": "engines/test_inprocess_backends.py",
    "integration/test_lancedb.py": "engines/test_lancedb.py",
    "integration/test_memory_engines.py": "engines/test_memory_engines.py",
    "integration/test_milvus.py": "engines/test_milvus.py",
    "unit/test_milvus_params.py": "engines/test_milvus_params.py",
    "integration/test_milvus_server.py": "engines/test_milvus_server.py",
    "integration/test_milvus_server_gone.py": "engines/test_milvus_server_gone.py",
    "integration/test_pgvector.py": "engines/test_pgvector.py",
    "unit/test_quantization_params.py": "engines/test_quantization_params.py",
    "integration/test_redis_faults.py": "engines/test_redis_faults.py",
    "integration/test_redis_server.py": "engines/test_redis_server.py",
    "e2e/test_ci_recipe.py": "exporting/test_ci_recipe.py",
    "unit/test_export_churn.py": "exporting/test_export_churn.py",
    "unit/test_export_engines.py": "exporting/test_export_engines.py",
    "unit/test_export_headers.py": "exporting/test_export_headers.py",
    "unit/test_export_inverse.py": "exporting/test_export_inverse.py",
    "integration/test_export_own_clients.py": "exporting/test_export_own_clients.py",
    "unit/test_export_pgvector.py": "exporting/test_export_pgvector.py",
    "integration/test_export_roundtrip.py": "exporting/test_export_roundtrip.py",
    "integration/test_export_verify.py": "exporting/test_export_verify.py",
    "integration/test_quantized_exports.py": "exporting/test_quantized_exports.py",
    "integration/test_redisvl_export.py": "exporting/test_redisvl_export.py",
    "unit/test_verify_build_threads.py": "exporting/test_verify_build_threads.py",
    "integration/test_verify_edits.py": "exporting/test_verify_edits.py",
    "integration/test_verify_engines.py": "exporting/test_verify_engines.py",
    "integration/test_verify_filtered.py": "exporting/test_verify_filtered.py",
    "unit/test_verify_latency_line.py": "exporting/test_verify_latency_line.py",
    "unit/test_verify_tolerance.py": "exporting/test_verify_tolerance.py",
    "unit/test_filter_attributes.py": "filtering/test_filter_attributes.py",
    "unit/test_filter_edges.py": "filtering/test_filter_edges.py",
    "integration/test_filter_odd_labels.py": "filtering/test_filter_odd_labels.py",
    "integration/test_filtered_backends.py": "filtering/test_filtered_backends.py",
    "integration/test_filtered_pgvector.py": "filtering/test_filtered_pgvector.py",
    "integration/test_filtered_qdrant.py": "filtering/test_filtered_qdrant.py",
    "integration/test_filtered_redis.py": "filtering/test_filtered_redis.py",
    "integration/test_filtered_resume.py": "filtering/test_filtered_resume.py",
    "integration/test_filtered_reuters.py": "filtering/test_filtered_reuters.py",
    "unit/test_filtering.py": "filtering/test_filtering.py",
    "integration/test_fusion_scifact.py": "fusion_tune/test_fusion_scifact.py",
    "integration/test_fusion_tune.py": "fusion_tune/test_fusion_tune.py",
    "unit/test_fusion_tune.py": "fusion_tune/test_fusion_tune_logic.py",
    "unit/test_groundtruth_live.py": "groundtruth/test_groundtruth_live.py",
    "unit/test_outofcore.py": "groundtruth/test_outofcore.py",
    "integration/test_build_cache.py": "indexes/test_build_cache.py",
    "unit/test_build_cache_faults.py": "indexes/test_build_cache_faults.py",
    "unit/test_build_cache_owned.py": "indexes/test_build_cache_owned.py",
    "unit/test_fake_index.py": "indexes/test_fake_index.py",
    "unit/test_index_params.py": "indexes/test_index_params.py",
    "unit/test_memory_measured.py": "indexes/test_memory_measured.py",
    "unit/test_live.py": "live/test_live.py",
    "integration/test_live_engines.py": "live/test_live_engines.py",
    "e2e/test_live_engines_exit.py": "live/test_live_engines_exit.py",
    "integration/test_live_pgvector.py": "live/test_live_pgvector.py",
    "integration/test_live_watch.py": "live/test_live_watch.py",
    "unit/test_watch_logic.py": "live/test_watch_logic.py",
    "unit/test_bvecs_mapped.py": "loaders/test_bvecs_mapped.py",
    "unit/test_byo_inputs.py": "loaders/test_byo_inputs.py",
    "integration/test_data_in_cwd.py": "loaders/test_data_in_cwd.py",
    "unit/test_input_edges.py": "loaders/test_input_edges.py",
    "unit/test_loaders.py": "loaders/test_loaders.py",
    "integration/test_shared_data.py": "loaders/test_shared_data.py",
    "e2e/test_cli_profile.py": "profiling/test_cli_profile.py",
    "integration/test_profile_cache_load.py": "profiling/test_profile_cache_load.py",
    "integration/test_profile_embed_batch.py": "profiling/test_profile_embed_batch.py",
    "unit/test_profile_report.py": "profiling/test_profile_report.py",
    "unit/test_profile_stats.py": "profiling/test_profile_stats.py",
    "e2e/test_behaviour_keys.py": "project/test_behaviour_keys.py",
    "e2e/test_doc_commands.py": "project/test_doc_commands.py",
    "unit/test_docs_reference.py": "project/test_docs_reference.py",
    "unit/test_install_scripts.py": "project/test_install_scripts.py",
    "e2e/test_notebooks.py": "project/test_notebooks.py",
    "unit/test_package_face.py": "project/test_package_face.py",
    "unit/test_packaging.py": "project/test_packaging.py",
    "unit/test_private_caches.py": "project/test_private_caches.py",
    "e2e/test_wheel.py": "project/test_wheel.py",
    "unit/test_plot_titles.py": "reporting/test_plot_titles.py",
    "e2e/test_report.py": "reporting/test_report.py",
    "unit/test_report_build.py": "reporting/test_report_build.py",
    "unit/test_report_plots.py": "reporting/test_report_plots.py",
    "unit/test_bm25.py": "rerank/test_bm25.py",
    "integration/test_byo_rerank.py": "rerank/test_byo_rerank.py",
    "integration/test_custom_rerank.py": "rerank/test_custom_rerank.py",
    "integration/test_export_rerank.py": "rerank/test_export_rerank.py",
    "unit/test_rerank.py": "rerank/test_rerank.py",
    "integration/test_rerank_cranfield.py": "rerank/test_rerank_cranfield.py",
    "integration/test_rerank_golden.py": "rerank/test_rerank_golden.py",
    "unit/test_rerank_spec.py": "rerank/test_rerank_spec.py",
    "unit/test_rerank_tune.py": "rerank/test_rerank_tune.py",
    "unit/test_route.py": "rerank/test_route.py",
    "unit/test_runfile_scores_and_knobs.py": "rerank/test_runfile_scores_and_knobs.py",
    "e2e/test_tune_rerank_cli.py": "rerank/test_tune_rerank_cli.py",
    "unit/test_run_kinds.py": "runs/test_run_kinds.py",
    "integration/test_run_safety.py": "runs/test_run_safety.py",
    "integration/test_secret_spellings.py": "runs/test_secret_spellings.py",
    "integration/test_owned_services.py": "services/test_owned_services.py",
    "integration/test_services_cli.py": "services/test_services_cli.py",
    "unit/test_binomial.py": "stats/test_binomial.py",
    "unit/test_irmetrics.py": "stats/test_irmetrics.py",
    "unit/test_metrics.py": "stats/test_metrics.py",
    "e2e/test_study_byo.py": "study/test_study_byo.py",
    "e2e/test_study.py": "study/test_study_cli.py",
    "unit/test_study.py": "study/test_study_logic.py",
    "integration/test_study_name_limit.py": "study/test_study_name_limit.py",
    "integration/test_build_search_derived.py": "tune/test_build_search_derived.py",
    "unit/test_cold.py": "tune/test_cold.py",
    "integration/test_cold_lancedb.py": "tune/test_cold_lancedb.py",
    "integration/test_cold_qdrant.py": "tune/test_cold_qdrant.py",
    "unit/test_engines_spec.py": "tune/test_engines_spec.py",
    "unit/test_joint_knobs.py": "tune/test_joint_knobs.py",
    "integration/test_memory_sweep.py": "tune/test_memory_sweep.py",
    "integration/test_optuna_storage.py": "tune/test_optuna_storage.py",
    "unit/test_pareto.py": "tune/test_pareto.py",
    "unit/test_preflight.py": "tune/test_preflight.py",
    "unit/test_scale_neighbourhood.py": "tune/test_scale_neighbourhood.py",
    "integration/test_scale_study.py": "tune/test_scale_study.py",
    "unit/test_spec.py": "tune/test_spec.py",
    "unit/test_storage_failure.py": "tune/test_storage_failure.py",
    "integration/test_storage_lost.py": "tune/test_storage_lost.py",
    "unit/test_store_tables.py": "tune/test_store_tables.py",
    "unit/test_sweep_confidence.py": "tune/test_sweep_confidence.py",
    "integration/test_sweep_defaults.py": "tune/test_sweep_defaults.py",
    "integration/test_sweep_memory_limit.py": "tune/test_sweep_memory_limit.py",
    "integration/test_sweep_ray.py": "tune/test_sweep_ray.py",
    "e2e/test_sweep_specs.py": "tune/test_sweep_specs.py",
    "unit/test_tenants.py": "tune/test_tenants_logic.py",
    "integration/test_tenants.py": "tune/test_tenants_run.py",
    "unit/test_topology.py": "tune/test_topology.py",
    "e2e/test_trace_load_sweep.py": "tune/test_trace_load_sweep.py",
    "unit/test_tune_cluster.py": "tune/test_tune_cluster.py",
    "unit/test_tune_config.py": "tune/test_tune_config.py",
    "unit/test_tune_decide.py": "tune/test_tune_decide.py",
    "integration/test_tune_heldout.py": "tune/test_tune_heldout.py",
    "integration/test_tune_options.py": "tune/test_tune_options.py",
    "unit/test_tune_scale.py": "tune/test_tune_scale.py",
    "integration/test_tune_sweep.py": "tune/test_tune_sweep.py",
    "unit/test_tune_target.py": "tune/test_tune_target.py",
    "integration/test_tune_workers.py": "tune/test_tune_workers.py",
    "unit/test_validate_once.py": "tune/test_validate_once.py",
}
#: tests moved from ``integration`` / ``e2e`` are marked ``slow`` (module level) unless every
#: test of theirs that needs no service and no model ran in under 3 s in all (measured under
#: load: a run of the fast-tier expression over those folders, --durations=0): these
FAST_FROM_SLOW_TIERS = frozenset({
    "e2e/test_cli_bench.py",
    "e2e/test_cli_profile.py",
    "e2e/test_live_engines_exit.py",
    "e2e/test_notebooks.py",
    "e2e/test_sweep_specs.py",
    "integration/test_export_own_clients.py",
    "integration/test_filter_odd_labels.py",
    "integration/test_filtered_reuters.py",
    "integration/test_load_writes.py",
    "integration/test_memory_sweep.py",
    "integration/test_owned_services.py",
    "integration/test_quantized_exports.py",
    "integration/test_services_cli.py",
})
#: text files whose references to a moved test are rewritten
_TEXT = (".py", ".md", ".toml", ".txt", ".yaml", ".yml", ".cfg", ".ini", ".sh", ".ipynb")
_TEXT_NAMES = ("Makefile", "run")


def _packages() -> set[str]:
    return {p.name for p in (ROOT / "retrieval").iterdir()
            if p.is_dir() and (p / "__init__.py").exists()}


def place(rel: str) -> str:
    """Where ``tests/<rel>`` belongs (``rel`` like ``unit/test_x.py``), relative to tests/."""
    if rel in PLACES:
        return PLACES[rel]
    name = rel.split("/", 1)[1]
    src = (ROOT / "tests" / rel).read_text(encoding="utf-8")
    used: collections.Counter[str] = collections.Counter()
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith(
                "retrieval."):
            used[node.module.split(".")[1]] += 1
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("retrieval."):
                    used[alias.name.split(".")[1]] += 1
    packages = _packages()
    for mod, _ in used.most_common():
        if mod in ("errors", "paths", "testing", "cli", "api") and len(used) > 1:
            continue  # everyone imports these; the next one says what is tested
        if mod in packages:
            return f"{mod}/{name}"
        return f"{FLAT}/{name}"
    return f"project/{name}"


def mark_slow(path: Path) -> bool:
    """Add ``slow`` to the module's ``pytestmark`` (created after the imports when absent)."""
    src = path.read_text(encoding="utf-8")
    tree = ast.parse(src)
    lines = src.splitlines(keepends=True)
    for node in tree.body:
        if isinstance(node, ast.Assign) and [ast.unparse(t) for t in node.targets] == [
                "pytestmark"]:
            value = ast.get_source_segment(src, node.value) or ""
            if "mark.slow" in value:
                return False
            if isinstance(node.value, ast.List):
                new = "pytestmark = [pytest.mark.slow, " + value[1:]
            else:
                new = "pytestmark = [pytest.mark.slow, " + value + "]"
            lines[node.lineno - 1:node.end_lineno] = [new + "\n"]
            break
    else:
        last = max((n.end_lineno or 0 for n in tree.body
                    if isinstance(n, ast.Import | ast.ImportFrom)), default=0)
        lines.insert(last, "\npytestmark = pytest.mark.slow  # cost tier: docs/development.md\n")
        if not any(isinstance(n, ast.Import) and any(a.name == "pytest" for a in n.names)
                   for n in tree.body):
            lines.insert(last, "import pytest\n")
    path.write_text("".join(lines), encoding="utf-8")
    return True


def _rewrite_refs(moves: dict[str, str], dry: bool) -> int:
    """Rewrite ``tests/<old>`` paths and ``tests.<old>`` module names in tracked text files."""
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    pats = []
    for old, new in moves.items():
        pats.append((f"tests/{old}", f"tests/{new}"))
        pats.append((f"tests.{old[:-3].replace('/', '.')}", f"tests.{new[:-3].replace('/', '.')}"))
    changed = 0
    for f in files:
        path = ROOT / f
        if not (f.endswith(_TEXT) or path.name in _TEXT_NAMES) or not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        new_text = text
        for a, b in pats:
            if a in new_text:
                new_text = re.sub(re.escape(a) + r"(?![\w])", b, new_text)
        if new_text != text:
            changed += 1
            if not dry:
                path.write_text(new_text, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dry-run", action="store_true")
    args = ap.parse_args(argv)
    moves: dict[str, str] = {}
    for tier in OLD_TIERS:
        for path in sorted((ROOT / "tests" / tier).glob("test_*.py")):
            rel = f"{tier}/{path.name}"
            moves[rel] = place(rel)
    targets = collections.Counter(moves.values())
    clash = [t for t, n in targets.items() if n > 1 or (ROOT / "tests" / t).exists()]
    if clash:
        print(f"refusing: two tests would land on the same path: {clash}", file=sys.stderr)
        return 2
    slow = 0
    for old, new in moves.items():
        tier = old.split("/")[0]
        marks = tier in ("integration", "e2e") and old not in FAST_FROM_SLOW_TIERS
        print(f"tests/{old} -> tests/{new}" + (" (slow)" if marks else ""))
        if not args.dry_run:
            (ROOT / "tests" / new).parent.mkdir(parents=True, exist_ok=True)
            subprocess.run(["git", "mv", f"tests/{old}", f"tests/{new}"], cwd=ROOT, check=True)
            if marks:
                slow += mark_slow(ROOT / "tests" / new)
    # references to any test moved so far (this run's, and the table's: a file added later
    # may still name an old path)
    known = {old: new for old, new in PLACES.items() if (ROOT / "tests" / new).exists()}
    n = _rewrite_refs({**known, **moves}, args.dry_run)
    print(f"{len(moves)} test files moved ({slow} marked slow), references rewritten in {n} "
          f"files")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
