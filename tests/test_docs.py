"""README is for users and stays short; it and docs/ hold current facts, not the story of how they were
reached: no numbered experiment runs or sessions, no talk of renting or leasing machines."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README_MAX_LINES = 450
# Numbered experiment sessions or runs ("session3", "sessions 7-9", "run 7"), and machine rentals
# ("one lease", "machine session", "rented"). The product's own leases (an Airflow run's claims, a
# warm model's lease files) are not machine rentals and do not match.
EXPERIMENT_LOG = re.compile(
    r"\bsessions? ?\d+"
    r"|\bruns? (?:no\.? ?|#)?\d+\b(?![–-]| ?(?:pages?|documents?|files?|times?|s\b|%|×))"
    r"|\b(?:machine|device|GPU) (?:leases?|sessions?|rentals?)\b"
    r"|\b(?:one|two|a|first|second|the) leases?\b(?! (?:file|runs|ran|ends))"
    r"|\brent(?:al|als|ed|ing)?\b",
    re.IGNORECASE,
)


def _user_docs() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def test_readme_stays_short():
    lines = (REPO / "README.md").read_text(encoding="utf-8").count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines; move detail into docs/"


def test_readme_and_docs_hold_no_experiment_log():
    found = [
        f"{path.relative_to(REPO)}:{n}: {match.group(0)!r}"
        for path in _user_docs()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in EXPERIMENT_LOG.finditer(line)
    ]
    assert not found, found


def test_the_pattern_tells_a_log_from_the_products_own_words():
    log = ["FP8 at 1.22× (session9)", "sessions 7-9", "in run 7 the loop", "two machine leases", "one lease"]
    product = ["its claims hold while its lease runs", "a lease file per task", "per run 9–28 kills"]
    assert all(EXPERIMENT_LOG.search(text) for text in log)
    assert not any(EXPERIMENT_LOG.search(text) for text in product + ["the UI's session", "run 2 pages"])
