"""A backfill larger than one run can map: each run maps what it can and the last task continues it.

A run maps at most ``core.max_map_length`` batches. Discover records the run's share of the
backfill (``BackfillProgress``, XCom key ``backfill``); the load writes "N of M batches done" to
its log and the run's record (the run report's runs table); ``ContinueBackfillOperator``
(airflow/continue_backfill.py), the backfill DAG's last task, triggers the next run of the same DAG
with the same Params and the progress so far, until nothing is left. Each run discovers again, so it
takes up exactly what is missing (loaded documents are known, read pages are checkpointed): a failed
run is retried or re-triggered like any other and the chain goes on from there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

XCOM_KEY = "backfill"
# Params the continuing run gets besides the run's own: batches done by the runs before it, and
# the backfill's size as the first run planned it (later runs plan only what is left).
DONE_PARAM, TOTAL_PARAM = "backfill_batches_done", "backfill_batches_total"


@dataclass(frozen=True)
class BackfillProgress:
    """One run's share of a backfill, in batches; ``mapped_documents`` counts against ``max_documents``."""

    done_before: int  # by earlier runs of the same backfill
    mapped: int  # by this run
    left: int  # for the runs after this one
    mapped_documents: int
    untaken: int = 0  # matching files past ``max_documents``, which no run of this backfill takes

    @property
    def total(self) -> int:
        return self.done_before + self.mapped + self.left

    @property
    def done(self) -> int:
        return self.done_before + self.mapped

    def line(self) -> str:
        """``N of M batches done`` as the task logs and the run report show it."""
        return f"{self.done} of {self.total} batches done"

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


def progress(
    params: dict[str, Any], planned: int, mapped: int, mapped_documents: int, untaken: int = 0
) -> BackfillProgress:
    """This run's share, from the run's Params (set when an earlier run continued the backfill)."""
    done_before = int(params.get(DONE_PARAM) or 0)
    return BackfillProgress(done_before, mapped, planned - mapped, mapped_documents, untaken)


def stop_reason(conf: dict[str, Any], done: BackfillProgress) -> str:
    """Why the backfill ends with this run (``next_conf`` gave None), for its last log line."""
    if done.left and conf.get("max_documents") is not None:
        return (f"max_documents ({conf['max_documents']}) reached with {done.left} planned batch(es) "
                f"and {done.untaken} more matching file(s) left untaken")  # fmt: skip
    if done.untaken:
        return (f"max_documents ({conf.get('max_documents')}) reached with {done.untaken} matching file(s) "
                "left untaken; trigger the backfill again (a higher max_documents) to take them")  # fmt: skip
    return "all batches done, no matching file left"


def next_conf(conf: dict[str, Any], done: BackfillProgress) -> dict[str, Any] | None:
    """The Params of the run that continues the backfill; None when it is complete."""
    limit = conf.get("max_documents")
    left_documents = None if limit is None else int(limit) - done.mapped_documents
    if not done.left or left_documents == 0:
        return None
    out = {**conf, DONE_PARAM: done.done, TOTAL_PARAM: done.total}
    if left_documents is not None:
        out["max_documents"] = left_documents
    return out
