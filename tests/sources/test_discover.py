"""Discovery over real folder trees (copies of small corpus PDFs), symlinks and globs included."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
import tracemalloc
from pathlib import Path

import pytest

from chandra_ocr.sources.discover import discover
from chandra_ocr.sources.entry import stream_sha256

NOW = time.time()
OLD = NOW - 3600
SMALL_PDFS = [
    "derived/phototest.scan.pdf",
    "derived/eurotext.scan.pdf",
    "ocrmypdf/tests/resources/trivial.pdf",
    "ocrmypdf/tests/resources/blank.pdf",
]


def _put(src: Path, dst: Path, mtime: float = OLD) -> Path:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(src, dst)
    os.utime(dst, (mtime, mtime))
    return dst


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def pdfs(corpus: Path) -> list[Path]:
    return [corpus / p for p in SMALL_PDFS]


def test_nested_folders_any_case_sorted(tmp_path: Path, pdfs: list[Path]) -> None:
    root = tmp_path.resolve() / "in"
    files = [
        _put(pdfs[0], root / "b" / "deep" / "x.pdf"),
        _put(pdfs[1], root / "a" / "Y.PDF"),
        _put(pdfs[2], root / "c.Pdf"),
    ]
    _put(pdfs[3], root / "notes.txt")
    _put(pdfs[3], root / ".hidden" / "z.pdf")
    _put(pdfs[3], root / "._c.pdf")  # macOS resource fork
    result = discover(root, {}, settle_seconds=30, now=NOW)
    assert [f.path for f in result.new] == [str(files[1]), str(files[0]), str(files[2])]
    for found in result.new:
        assert found.doc_id == _sha(Path(found.path))
        assert found.bytes == Path(found.path).stat().st_size and found.mtime == pytest.approx(OLD)
    assert not (result.known or result.duplicates or result.recent or result.refused)


def test_recent_known_and_duplicate_files(tmp_path: Path, pdfs: list[Path]) -> None:
    root = tmp_path.resolve() / "in"
    fresh = _put(pdfs[0], root / "fresh.pdf", mtime=NOW - 5)
    known_here = _put(pdfs[1], root / "known.pdf")
    moved = _put(pdfs[2], root / "moved.pdf")
    first = _put(pdfs[3], root / "a.pdf")
    copy = _put(pdfs[3], root / "b" / "copy.pdf")
    kb = {_sha(known_here): str(known_here), _sha(moved): "/archive/elsewhere/moved.pdf"}
    result = discover(root, kb, settle_seconds=30, now=NOW)
    assert result.recent == [str(fresh)]
    assert [f.path for f in result.known] == [str(known_here)]
    assert [(f.path, other) for f, other in result.duplicates] == [
        (str(copy), str(first)),
        (str(moved), "/archive/elsewhere/moved.pdf"),
    ]
    assert [f.path for f in result.new] == [str(first)]
    assert discover(root, kb, settle_seconds=0, now=NOW).recent == []


def test_symlinks_outside_the_root_are_refused_inside_followed_once(tmp_path: Path, pdfs: list[Path]) -> None:
    root, outside = tmp_path.resolve() / "in", tmp_path.resolve() / "outside"
    real = _put(pdfs[0], root / "docs" / "real.pdf")
    secret = _put(pdfs[1], outside / "secret.pdf")
    (root / "alias.pdf").symlink_to(real)
    (root / "docs_again").symlink_to(root / "docs")
    (root / "escape.pdf").symlink_to(secret)
    (root / "escape_dir").symlink_to(outside)
    (root / "dangling.pdf").symlink_to(root / "gone.pdf")
    result = discover(root, {}, settle_seconds=30, now=NOW)
    assert [f.path for f in result.new] == [str(real)]
    assert not result.duplicates
    refused = dict(result.refused)
    assert set(refused) == {str(root / "escape.pdf"), str(root / "escape_dir"), str(root / "dangling.pdf")}
    assert "outside the source root" in refused[str(root / "escape.pdf")]
    assert "broken" in refused[str(root / "dangling.pdf")]


def test_glob_source_and_dotdot_escape(tmp_path: Path, pdfs: list[Path]) -> None:
    root = tmp_path.resolve() / "in"
    wanted = [_put(pdfs[0], root / "2024" / "2024-01.pdf"), _put(pdfs[1], root / "x" / "y" / "2024-02.pdf")]
    _put(pdfs[2], root / "2023" / "2023-12.pdf")
    _put(pdfs[3], tmp_path / "outside" / "2024-03.pdf")
    result = discover(f"{root}/**/2024-*.pdf", {}, settle_seconds=30, now=NOW)
    assert sorted(f.path for f in result.new) == sorted(str(p) for p in wanted)
    escaped = discover(f"{root}/*/../../outside/*.pdf", {}, settle_seconds=30, now=NOW)
    assert not escaped.new and escaped.refused and "'..'" in escaped.refused[0][1]


def test_limit_and_modification_window(tmp_path: Path, pdfs: list[Path]) -> None:
    root = tmp_path.resolve() / "in"
    for i, pdf in enumerate(pdfs):
        _put(pdf, root / f"{i}.pdf", mtime=OLD + i * 100)
    limited = discover(root, {}, settle_seconds=30, now=NOW, limit=2)
    assert [Path(f.path).name for f in limited.new] == ["0.pdf", "1.pdf"]
    assert discover(root, {}, settle_seconds=30, now=NOW, limit=0).new == []
    window = discover(root, {}, settle_seconds=30, now=NOW, modified_since=OLD + 50, modified_until=OLD + 250)
    assert [Path(f.path).name for f in window.new] == ["1.pdf", "2.pdf"]


def test_missing_source_is_refused(tmp_path: Path) -> None:
    result = discover(tmp_path / "nope", {}, settle_seconds=0)
    assert result.refused and not result.new


def test_hashing_streams_the_file(tmp_path: Path) -> None:
    big = tmp_path / "big.pdf"
    with open(big, "wb") as f:
        f.write(b"%PDF-1.7\n")
        f.truncate(64 * 1024 * 1024)  # 64 MiB, sparse
    tracemalloc.start()
    try:
        with open(big, "rb") as f:
            digest = stream_sha256(f)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 1024 * 1024
    expected = hashlib.sha256()
    with open(big, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            expected.update(chunk)
    assert digest == expected.hexdigest()


def test_a_folder_of_symlinks_leading_out_names_them_and_why_instead_of_no_pdf(
    tmp_path: Path, samples: Path
) -> None:
    """Links to PDFs elsewhere are not followed out of the source: preflight names the skipped links
    and why (not "holds no PDF file"), and says what to do, before any work."""
    from chandra_ocr.errors import ConfigError
    from chandra_ocr.preflight import check_source

    elsewhere, links = tmp_path / "archive", tmp_path / "links"
    links.mkdir()
    for name in ("report.pdf", "mixed.pdf"):
        _put(samples / name, elsewhere / name)
        (links / name).symlink_to(elsewhere / name)
    with pytest.raises(ConfigError) as refused:
        check_source(str(links))
    message = str(refused.value)
    assert "holds no PDF" not in message and len(message.splitlines()) == 1, message
    for name in ("mixed.pdf", "report.pdf"):
        assert f"{links / name}: symlink leads outside the source root (to {elsewhere / name})" in message
    assert message.startswith(f"source {links}: no PDF file to read, 2 skipped (")
    assert message.endswith("symlinks are followed only inside the source: give the folder they lead to "
                            "as the source, or copy the files in")  # fmt: skip
