"""The churn bench spec (YAML, ``extra="forbid"``): :class:`ChurnSpec`; see
``sweeps/churn-qqp20k.yaml``. Each config is an index entry (``backend`` + ``build`` +
``search``, validated once by :func:`retrieval.indexes.entry.check_entry`); the ``runbook`` is
a mapping (``{steps: [...]}``) or a YAML file holding one (:mod:`retrieval.workload.runbook`).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from retrieval.errors import param_error
from retrieval.indexes.entry import IndexEntry, check_entry
from retrieval.params import Params, RunName, Seed
from retrieval.specfile import load_model
from retrieval.tune.config import ConfidenceSpec
from retrieval.workload.runbook import RunbookSpec, load_runbook

log = logging.getLogger(__name__)

#: which search steps get a control (a fresh build on the live set) when the step does not say:
#: ``marked`` only the steps marked ``control: true`` (and the last search step), ``every``,
#: ``last``, ``none``
ControlRule = Literal["marked", "every", "last", "none"]


class ChurnConfig(IndexEntry):
    """One index under churn; ``label`` names it in tables (default: the backend)."""

    label: str | None = None
    server: bool = Field(False, description="a private server process of the backend's engine "
                         "(engines with a local server)")


class ChurnSpec(Params):
    """A runbook applied to each config (see the module docstring). ``target_recall``: the
    recall@k the advice holds (its lower bound, ``confidence``); ``knob_max``: the largest
    value of the monotone search knob the re-tune tries (default 16x the configured one, within
    the backend's range); ``damage_points``: index damage (recall points) above which a clean-up
    or a rebuild is advised over a re-tune; ``write_batch``: vectors per insert / delete call
    (each call timed)."""

    name: RunName = "churn"
    dataset: str | dict[str, Any]
    k: int = Field(10, ge=1, le=1000)
    seed: Seed = 0
    threads: int = Field(1, ge=1, le=512, description="threads inside each index")
    queries: int | None = Field(200, ge=1, description="the first N queries (None: all)")
    warmup: int = Field(16, ge=0, description="untimed queries before each search step")
    target_recall: float | None = Field(0.95, gt=0.0, le=1.0)
    confidence: ConfidenceSpec = Field(default_factory=ConfidenceSpec)
    control: ControlRule = "marked"
    retune: bool = Field(True, description="re-run the target search on the churned index at "
                         "each search step")
    knob_max: int | None = Field(None, ge=1)
    probe_maintain: bool = Field(True, description="after the runbook: maintain once and "
                                 "search again (what a clean-up recovers, and its time)")
    damage_points: float = Field(1.0, ge=0.0, le=100.0)
    write_batch: int = Field(1000, ge=1, le=1_000_000)
    configs: list[ChurnConfig] = Field(min_length=1)
    runbook: str | dict[str, Any] = Field(description="a runbook mapping ({steps: [...]}) or "
                                          "a YAML file holding one")
    source: str = Field("<memory>", exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _indexes(cls, data: Any) -> Any:
        """``indexes:`` (the name every other spec uses) is the churn spec's list of configs;
        the former ``configs:`` is still accepted, with a note in the log."""
        if not isinstance(data, dict):
            return data
        if "indexes" in data and "configs" in data:
            raise ValueError("give 'indexes' (or the former name 'configs'), not both")
        if "indexes" in data:
            data = {**data}
            data["configs"] = data.pop("indexes")
        elif "configs" in data:
            log.info("churn spec: 'configs' is the former name of 'indexes' (the name every "
                     "spec uses); it is still read")
        return data


def validate_churn_spec(spec: ChurnSpec) -> ChurnSpec:
    """Every index entry against its backend's models; labels unique."""
    labels = []
    for i, c in enumerate(spec.configs):
        check_entry(c, spec.k, where=spec.source, field=f"configs[{i}]")
        labels.append(c.label or c.backend)
    runbook_of(spec)  # a bad runbook is refused with the spec, before any data is read
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise param_error("configs", f"distinct labels (set 'label' on each config of backend "
                          f"'{dup[0]}')", dup[0], where=spec.source)
    return spec


def runbook_of(spec: ChurnSpec) -> RunbookSpec:
    """The spec's runbook (a file named by ``runbook`` is read, relative to the spec's folder
    when not found from the working directory)."""
    base = Path(spec.source).parent if spec.source != "<memory>" else None
    return load_runbook(spec.runbook, where=spec.source, base_dir=base)


def runbook_name(spec: ChurnSpec) -> str:
    """The runbook's name: its file's stem (``uniform-churn-20k``), or ``<spec name> (inline)``
    for a runbook written in the spec."""
    if isinstance(spec.runbook, str):
        return Path(spec.runbook).stem
    return f"{spec.name} (inline)"


def parse_churn_spec(data: Any, source: str = "<memory>") -> ChurnSpec:
    return load_model(data, ChurnSpec, source=source, what="a churn spec",
                      extra={"source": source}, check=validate_churn_spec)


def load_churn_spec(path: str | Path) -> ChurnSpec:
    """Read and validate a churn spec file; errors name the file and the field."""
    p = Path(path)
    return load_model(p, ChurnSpec, what="a churn spec", extra={"source": str(p)},
                      check=validate_churn_spec)


__all__ = ["ChurnConfig", "ChurnSpec", "ControlRule", "load_churn_spec", "parse_churn_spec",
           "runbook_name", "runbook_of", "validate_churn_spec"]
