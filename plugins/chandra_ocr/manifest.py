"""Small, JSON-serialisable batch manifests passed between stages (and through Airflow XCom)."""

from __future__ import annotations

import hashlib
import math
import posixpath
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Literal

# A document's progress through the stages: planned by discover, extracted once its pages are
# checkpointed (or its quarantine is decided), written once its staged rows and exports exist;
# elsewhere once another run on the same KB claimed or loaded it first (``DocRef.owner``; no stage
# of this run touches it again: stages/ownership.py).
DocState = Literal["planned", "extracted", "written", "elsewhere"]


@dataclass
class DocRef:
    """One document of a batch: where it is and what the stages learned about it so far."""

    doc_id: str
    source: str  # the original file or object URL (never modified)
    bytes: int
    n_pages: int = 0  # estimate from planning; exact after extraction
    work_pdf: str | None = None  # compressed copy when kept, else ``readable`` (set by compress)
    compressed_bytes: int | None = None
    compress_method: str | None = None
    state: DocState = "planned"
    status: str | None = None  # the outcome once known: ingested | partial | quarantined
    error: str | None = None  # why it is partial or quarantined
    prompt_tokens: int = 0  # spent on its pages, fallback attempts included (set by assemble)
    output_tokens: int = 0
    local: str | None = None  # a remote source's copy in the work area, streamed once by discovery
    replaces: str | None = None  # doc_id of the older document at the same location (forgotten once loaded)
    owner: str | None = None  # state ``elsewhere``: the run that ingests it instead of this one

    @property
    def readable(self) -> str:
        """The file the stages read: the local copy of a remote object, else the original."""
        return self.local or self.source


@dataclass
class Batch:
    """A unit of mapped work: documents totalling about ``batch_pages`` pages."""

    batch_id: str
    docs: list[DocRef]
    counts: dict[str, int] = field(default_factory=dict)
    engine: str | None = None  # set by the extract stage: which engine read the OCR pages
    model: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # stage → wall seconds it took this batch
    engine_metrics: dict[str, Any] = field(default_factory=dict)  # the engine's paging values (extract)

    @property
    def pages(self) -> int:
        """Pages of the batch's documents (planning estimates until extracted)."""
        return sum(d.n_pages for d in self.docs)

    @classmethod
    def of(cls, docs: list[DocRef]) -> Batch:
        """A batch whose id is derived from its documents (deterministic across reruns)."""
        digest = hashlib.sha256("".join(d.doc_id for d in docs).encode()).hexdigest()[:12]
        return cls(batch_id=f"b-{digest}", docs=docs)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> Batch:
        names = {f.name for f in fields(DocRef)}
        docs = [DocRef(**{k: v for k, v in d.items() if k in names}) for d in value["docs"]]
        return cls(
            batch_id=value["batch_id"],
            docs=docs,
            counts=dict(value.get("counts", {})),
            engine=value.get("engine"),
            model=value.get("model"),
            seconds=dict(value.get("seconds", {})),
            engine_metrics=dict(value.get("engine_metrics", {})),
        )


def own_docs(batches: list[Batch]) -> list[DocRef]:
    """The batches' documents this run ingests (not those another run claimed or loaded first)."""
    return [d for b in batches for d in b.docs if d.state != "elsewhere"]


def pages_read(batches: list[Batch]) -> int:
    """Pages of the batches' documents that this run read (a quarantined one has only a planning guess)."""
    return sum(d.n_pages for d in own_docs(batches) if d.status != "quarantined")


def incomplete(batches: list[Batch]) -> list[DocRef]:
    """This run's documents of the batches that are quarantined or partial (``error`` says why)."""
    return [d for d in own_docs(batches) if d.status in ("quarantined", "partial")]


def incomplete_line(doc: DocRef) -> str:
    """``<status> <source>: <reason>``, as the stages' warnings name a quarantined or partial document."""
    return f"{doc.status} {doc.source}: {doc.error or 'no reason recorded'}"


def file_names(docs: list[DocRef], shown: int = 5) -> str:
    """The first ``shown`` documents' file names, then how many more (for one log line)."""
    names = ", ".join(posixpath.basename(d.source) or d.source for d in docs[:shown])
    return names + (f" and {len(docs) - shown} more" if len(docs) > shown else "")


def status_counts(batches: list[Batch]) -> dict[str, int]:
    """This run's documents of the batches by outcome (``unknown`` for one that no stage finished)."""
    counts: dict[str, int] = {}
    for doc in own_docs(batches):
        counts[doc.status or "unknown"] = counts.get(doc.status or "unknown", 0) + 1
    return counts


def elsewhere_counts(batches: list[Batch]) -> dict[str, int]:
    """Run id → documents of the batches that that run ingests instead of this one."""
    counts: dict[str, int] = {}
    for doc in (d for b in batches for d in b.docs if d.state == "elsewhere"):
        counts[doc.owner or "?"] = counts.get(doc.owner or "?", 0) + 1
    return counts


def run_metrics(batches: list[Batch]) -> dict[str, Any]:
    """A run's metrics from its batches: tokens and counts summed, ``stage_seconds`` summed per stage, and the
    engine metrics (a value the batches disagree on becomes the sorted list of their values).
    """
    metrics: dict[str, Any] = {"batches": len(batches), "engines": sorted({b.engine or "-" for b in batches})}
    stages: dict[str, float] = {}
    engine: dict[str, list[Any]] = {}
    for key in ("prompt_tokens", "output_tokens"):
        metrics[key] = sum(getattr(d, key) for b in batches for d in b.docs)
    for b in batches:
        for key, n in b.counts.items():
            metrics[key] = metrics.get(key, 0) + n
        for stage, s in b.seconds.items():
            stages[stage] = stages.get(stage, 0.0) + s
        for key, value in b.engine_metrics.items():
            if key == "model_use":  # per task: summed up by the run record (warm_engine.model_use_summary)
                continue
            if value not in engine.setdefault(key, []):
                engine[key].append(value)
    for key, values in engine.items():
        metrics.setdefault(key, values[0] if len(values) == 1 else sorted(values, key=str))
    metrics["stage_seconds"] = {k: round(v, 3) for k, v in stages.items()}
    return metrics


def plan_batches(docs: list[DocRef], batch_pages: int) -> list[Batch]:
    """Pack documents in order into batches of at most ``batch_pages`` pages (a larger document alone).

    The batches come out about even: N pages make about ceil(N / batch_pages) batches of
    N / that many pages each (210 pages at 200 per batch: two of ~105, not 200 and 10), so a
    run's last batch does not leave a worker idle.
    """
    sizes = [max(1, d.n_pages) for d in docs]
    target = sum(sizes) / max(1, math.ceil(sum(sizes) / batch_pages))
    batches: list[Batch] = []
    current: list[DocRef] = []
    pages = 0
    for doc, n in zip(docs, sizes, strict=True):
        if current and pages + n > batch_pages:
            batches.append(Batch.of(current))
            current, pages = [], 0
        current.append(doc)
        pages += n
        if pages >= target:
            batches.append(Batch.of(current))
            current, pages = [], 0
    if current:
        batches.append(Batch.of(current))
    return batches
