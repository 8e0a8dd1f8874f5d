"""The shipped runbook shapes, as functions of the base size (the YAML files under
``datasets/runbooks/`` are these, written for the 20k QQP MiniLM base): each returns the
mapping :class:`~retrieval.workload.runbook.RunbookSpec` reads.

- :func:`uniform_churn`: insert half the base, then ``rounds`` times replace ``fraction`` of
  the live ids (at random) with unseen rows, searching after each round;
- :func:`clustered_drift`: rows grouped by k-means cluster; start on the first clusters, then
  each round deletes ``fraction`` of the live ids and inserts rows from clusters absent at the
  start;
- :func:`bulk_deletion`: insert the whole base, then delete 10%, 20%, ... (``fractions``, each
  of the base) of it in one step each, searching (and maintaining) after each;
- :func:`grow_only`: insert a quarter of the base, then append a quarter at a time (4x growth).
"""

from __future__ import annotations

from typing import Any

Steps = list[dict[str, Any]]


def uniform_churn(n: int, *, start_fraction: float = 0.5, fraction: float = 0.1,
                  rounds: int = 10, control: str = "every") -> dict[str, Any]:
    """Replace ``fraction`` of the live set per round with unseen rows (``n`` base rows)."""
    live = int(n * start_fraction)
    per = max(1, int(live * fraction))
    rounds = min(rounds, (n - live) // per)
    steps: Steps = [{"insert": {"start": 0, "end": live}}, {"search": {}}]
    pos = live
    for r in range(rounds):
        steps.append({"replace": {"start": pos, "end": pos + per, "seed": r}})
        steps.append({"search": {"control": True} if control == "every" else {}})
        pos += per
    return {"steps": steps}


def clustered_drift(n: int, *, clusters: int = 8, start_fraction: float = 0.5,
                    fraction: float = 0.1, rounds: int = 10) -> dict[str, Any]:
    """Start on the first clusters (rows in cluster order), then delete ``fraction`` of the live
    ids and insert as many rows of the later clusters, per round."""
    live = int(n * start_fraction)
    per = max(1, int(live * fraction))
    rounds = min(rounds, (n - live) // per)
    steps: Steps = [{"insert": {"start": 0, "end": live}}, {"search": {}}]
    pos = live
    for r in range(rounds):
        steps.append({"delete": {"fraction": fraction, "seed": r}})
        steps.append({"insert": {"start": pos, "end": pos + per}})
        steps.append({"search": {"control": True}})
        pos += per
    return {"order": {"clusters": clusters, "seed": 0}, "steps": steps}


def bulk_deletion(n: int, *, fractions: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5),
                  maintain: bool = True) -> dict[str, Any]:
    """Delete growing shares of the base (cumulative ``fractions`` of ``n``, ranges from the
    top), searching before and after each clean-up."""
    steps: Steps = [{"insert": {"start": 0, "end": n}}, {"search": {}}]
    done = 0
    for f in fractions:
        upto = int(n * f)
        if upto <= done:
            continue
        steps.append({"delete": {"start": n - upto, "end": n - done}})
        steps.append({"search": {"control": True}})
        if maintain:
            steps += [{"maintain": {}}, {"search": {}}]
        done = upto
    return {"steps": steps}


def grow_only(n: int, *, parts: int = 4) -> dict[str, Any]:
    """Insert ``n / parts`` rows, then append the same again ``parts - 1`` times."""
    per = n // parts
    steps: Steps = []
    for p in range(parts):
        steps.append({"insert": {"start": p * per, "end": (p + 1) * per}})
        steps.append({"search": {"control": p > 0}})
    return {"steps": steps}


SHAPES = {"uniform-churn": uniform_churn, "clustered-drift": clustered_drift,
          "bulk-deletion": bulk_deletion, "grow-only": grow_only}

__all__ = ["SHAPES", "bulk_deletion", "clustered_drift", "grow_only", "uniform_churn"]
