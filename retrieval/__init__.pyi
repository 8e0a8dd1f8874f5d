# Types of the lazy public API of retrieval/__init__.py (the module itself imports nothing: the
# names below resolve on first access). tests/unit/test_api.py checks both name the same things.
from retrieval.api import plots as plots
from retrieval.api.profiler import ProfileRun as ProfileRun
from retrieval.api.profiler import profile as profile
from retrieval.api.results import BenchRun as BenchRun
from retrieval.api.results import CacheRun as CacheRun
from retrieval.api.results import EvalRun as EvalRun
from retrieval.api.results import ExportedConfig as ExportedConfig
from retrieval.api.results import FusionRun as FusionRun
from retrieval.api.results import IndexRun as IndexRun
from retrieval.api.results import ProfileRunResult as ProfileRunResult
from retrieval.api.results import Report as Report
from retrieval.api.results import RerankRun as RerankRun
from retrieval.api.results import RunResult as RunResult
from retrieval.api.results import StudyRun as StudyRun
from retrieval.api.results import SweepRun as SweepRun
from retrieval.api.results import Verification as Verification
from retrieval.api.verbs import bench_churn as bench_churn
from retrieval.api.verbs import bench_embed as bench_embed
from retrieval.api.verbs import bench_fanout as bench_fanout
from retrieval.api.verbs import bench_load as bench_load
from retrieval.api.verbs import evaluate as evaluate
from retrieval.api.verbs import export as export
from retrieval.api.verbs import open_run as open_run
from retrieval.api.verbs import report as report
from retrieval.api.verbs import sweep as sweep
from retrieval.api.verbs import tune_cache as tune_cache
from retrieval.api.verbs import tune_fusion as tune_fusion
from retrieval.api.verbs import tune_rerank as tune_rerank
from retrieval.api.verbs import verify as verify
from retrieval.api.watching import WatchRun as WatchRun
from retrieval.api.watching import watch as watch
from retrieval.bench.embed.spec import EmbedBenchConfig as EmbedBenchConfig
from retrieval.bench.fanout.spec import FanoutSpec as FanoutSpec
from retrieval.cache.spec import CacheTuneSpec as CacheTuneSpec
from retrieval.data import VectorDataset as VectorDataset
from retrieval.errors import ConfigError as ConfigError
from retrieval.errors import DataError as DataError
from retrieval.errors import RwbError as RwbError
from retrieval.fusion_tune.spec import FusionTuneSpec as FusionTuneSpec
from retrieval.profiling.spec import ProfileSpec as ProfileSpec
from retrieval.rerank.spec import RerankerSpec as RerankerSpec
from retrieval.rerank.spec import RerankSweepSpec as RerankSweepSpec
from retrieval.study.spec import StudySpec as StudySpec
from retrieval.tune.spec import IndexEntry as IndexEntry
from retrieval.tune.spec import SweepSpec as SweepSpec

__version__: str
__all__: list[str]
