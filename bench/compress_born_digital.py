"""Time per stage on the corpus's born-digital PDFs, this tree against another: where compression goes.

    git archive <commit> plugins sql | tar -x -C /tmp/base   # plugins/chandra_ocr/sql links to sql/
    .venv/bin/python -m bench.compress_born_digital --against /tmp/base/plugins [--repeats 2] [--out F]

Both trees ingest the docling born-digital PDFs of the corpus (``docling/tests/data/pdf/sources``)
with the engine ``cpu`` (what ``auto`` is without a GPU, the DAGs' default), each run in a child
process into a new knowledge base, taking turns ``--repeats`` times. Each run's seconds per stage
(summed over its batches, as the run report shows them), documents compressed and OCR pages are
written to ``--out`` (default ``bench/results/compress_born_digital.json``) with the medians.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = "docling/tests/data/pdf/sources"

_CHILD = """
import json, sys
from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.pipeline import run
summary = run(sys.argv[1], sys.argv[2], IngestOptions(engine="cpu", pdf=PdfOptions(settle_seconds=0)))
stages = {}
for b in summary.batches:
    for stage, s in b.seconds.items():
        stages[stage] = stages.get(stage, 0.0) + s
docs = [d for b in summary.batches for d in b.docs]
print(json.dumps({"stage_seconds": stages, "documents": len(docs), "pages": summary.pages,
                  "compressed": sum(d.compress_method not in (None, "none") for d in docs),
                  "ocr_pages": sum(b.counts.get("ocr_pages", 0) for b in summary.batches),
                  "seconds": summary.seconds}))
"""


def one_run(plugins: Path, src: Path, kb: Path) -> dict:
    env = os.environ | {"PYTHONPATH": str(plugins)}
    out = subprocess.run([sys.executable, "-c", _CHILD, str(src), str(kb)], env=env, check=True,
                         capture_output=True, text=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--against", type=Path, required=True, help="the other tree's plugins folder")
    corpus = Path(os.environ.get("CHANDRA_OCR_CORPUS", REPO.parent / "shared" / "corpus"))
    parser.add_argument("--corpus", type=Path, default=corpus)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--work", type=Path, default=REPO / "bench" / ".work" / "compress")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "compress_born_digital.json")
    args = parser.parse_args()
    src = args.corpus / SOURCES
    trees = {"this": REPO / "plugins", "other": args.against.resolve()}
    runs: dict[str, list[dict]] = {k: [] for k in trees}
    for i in range(args.repeats):
        for name, plugins in trees.items():
            runs[name].append(one_run(plugins, src, args.work / f"kb-{name}-{i}"))
            print(name, i, json.dumps(runs[name][-1]), flush=True)
    medians = {
        name: {stage: round(statistics.median(r["stage_seconds"].get(stage, 0.0) for r in rs), 3)
               for stage in ("compress", "extract", "assemble", "load")}
        for name, rs in runs.items()
    }  # fmt: skip
    result = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {os.cpu_count()} cores",
        "command": " ".join(sys.argv),
        "corpus": SOURCES,
        "other": str(trees["other"]),
        "median_stage_seconds": medians,
        "compress_share": {
            name: round(m["compress"] / max(sum(m.values()), 1e-9), 3) for name, m in medians.items()
        },
        "runs": runs,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(json.dumps({k: result[k] for k in ("median_stage_seconds", "compress_share")}, indent=1))


if __name__ == "__main__":
    main()
