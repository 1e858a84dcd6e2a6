"""Passwords of encrypted PDFs: looked up by doc_id, path ending or file name, used by triage, rendering
and the fallbacks, and never written to a log, the knowledge base or its work files."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from chandra_ocr.config import IngestOptions, PdfOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.pdf.passwords import PasswordBook, load_passwords, parse_passwords
from chandra_ocr.pipeline import run

# corpus file → (user password as typed, text on its first page); see the corpus's PASSWORDS.md
KNOWN = {
    "camelot/tests/files/health_protected.pdf": ("userpass", "Public Health Outlay"),
    "pdfminer/samples/encryption/aes-256-r6.pdf": ("usersecret", "Hello World"),
    # R6 with a password that opens only after SASLprep (ª → a, soft hyphen dropped)
    "pdfjs/test/pdfs/saslprep-r6.pdf": ("S\u00aaSL\u00adprep", "Hello pdf.js world"),
}
WRONG = "sample-files/005-libreoffice-writer-password/libreoffice-writer-password.pdf"
WRONG_PASSWORD = "not-the-password-7f3a9c"
LOCKED = "pdfplumber/tests/pdfs/password-example.pdf"  # no password given for it


def test_lookup_by_doc_id_then_longest_path_ending_then_file_name():
    book = PasswordBook(
        {"a.pdf": "by-name", "in/a.pdf": "by-folder", "/data/in/a.pdf": "by-path", "f" * 64: "by-id"}
    )
    assert book.lookup("f" * 64, "/data/in/a.pdf") == "by-id"
    assert book.lookup("0" * 64, "/data/in/a.pdf") == "by-path"
    assert book.lookup("0" * 64, "/other/in/a.pdf") == "by-folder"
    assert book.lookup("0" * 64, "/other/a.pdf") == "by-name"
    assert book.lookup("0" * 64, "/other/ba.pdf") is None  # whole path components only
    assert book.for_documents([("f" * 64, "/x.pdf"), ("1" * 64, "/x.pdf")]) == {"f" * 64: "by-id"}


def test_passwords_stay_out_of_reprs_and_error_messages(tmp_path):
    book = PasswordBook({"a.pdf": "hunter2-secret"})
    assert "hunter2" not in repr(book) and "hunter2" not in str(book) and "1 entries" in repr(book)
    for text in ('{"a.pdf": "hunter2-secret"', '["hunter2-secret"]', '{"a.pdf": 12345678}'):
        with pytest.raises(ConfigError) as err:
            parse_passwords(text)
        assert "hunter2" not in str(err.value) and "12345678" not in str(err.value)
    with pytest.raises(ConfigError, match="cannot read passwords file"):
        load_passwords(tmp_path / "missing.json")


@pytest.mark.corpus
def test_encrypted_documents_open_with_their_passwords_and_the_passwords_leave_no_trace(
    corpus: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
):
    src, kb = tmp_path / "in", tmp_path / "kb"
    (src / "sub").mkdir(parents=True)
    names = {}
    for i, rel in enumerate(KNOWN):
        names[rel] = src / ("sub" if i == 1 else "") / f"known{i}.pdf"
        shutil.copy(corpus / rel, names[rel])
    shutil.copy(corpus / WRONG, src / "wrong.pdf")
    shutil.copy(corpus / LOCKED, src / "locked.pdf")
    rels = list(KNOWN)
    secrets = {  # one key of each kind: file name, path ending, doc_id
        "known0.pdf": KNOWN[rels[0]][0],
        "sub/known1.pdf": KNOWN[rels[1]][0],
        hashlib.sha256(names[rels[2]].read_bytes()).hexdigest(): KNOWN[rels[2]][0],
        "wrong.pdf": WRONG_PASSWORD,
    }
    secrets_file = tmp_path / "secrets" / "passwords.json"
    secrets_file.parent.mkdir()
    secrets_file.write_text(json.dumps(secrets, ensure_ascii=False), encoding="utf-8")
    caplog.set_level(logging.DEBUG)

    options = IngestOptions(engine="text", pdf=PdfOptions(settle_seconds=0, passwords_file=str(secrets_file)))
    summary = run(src, kb, options)

    con = duckdb.connect(str(kb / "kb.duckdb"), read_only=True)
    try:
        docs = {r[0]: r[1:] for r in con.execute("SELECT file_name, status, error FROM documents").fetchall()}
        text = dict(
            con.execute(
                "SELECT file_name, string_agg(b.text, ' ') "
                "FROM documents JOIN blocks b USING (doc_id) GROUP BY 1"
            ).fetchall()
        )
        dump = " ".join(
            str(row)
            for table in ("documents", "pages", "blocks", "chunks", "runs")
            for row in con.execute(f"SELECT * FROM {table}").fetchall()
        )
    finally:
        con.close()
    for i, (_password, words) in enumerate(KNOWN.values()):
        assert docs[f"known{i}.pdf"] == ("ingested", None)
        assert words in text[f"known{i}.pdf"]
    assert docs["wrong.pdf"] == ("quarantined", "encrypted: the password given is wrong")
    assert docs["locked.pdf"] == ("quarantined", "encrypted: a password is required to open it")
    assert summary.statuses == {"ingested": 3, "quarantined": 2}

    forms = [p for p, _ in KNOWN.values()] + ["SaSLprep", WRONG_PASSWORD]
    logged = caplog.text + " ".join(repr(r.args) + repr(r.__dict__) for r in caplog.records)
    files = b" ".join(p.read_bytes() for p in kb.rglob("*") if p.is_file() and p.suffix != ".duckdb")
    for form in forms:
        assert (
            form not in logged
            and form not in dump
            and form not in repr(summary)
            and form not in repr(options)
        )
        assert form.encode() not in files and form.encode() not in (kb / "kb.duckdb").read_bytes()


@pytest.mark.corpus
@pytest.mark.slow
def test_an_encrypted_page_on_the_ocr_route_is_rendered_with_its_password(corpus: Path, tmp_path: Path):
    """Rendering happens in the PDF workers; without the password there the page would fail."""
    src = tmp_path / "in"
    src.mkdir()
    rel = "camelot/tests/files/health_protected.pdf"
    shutil.copy(corpus / rel, src / "health.pdf")
    secrets_file = tmp_path / "passwords.json"
    secrets_file.write_text(json.dumps({"health.pdf": KNOWN[rel][0]}), encoding="utf-8")
    pdf = PdfOptions(
        settle_seconds=0, passwords_file=str(secrets_file), min_text_chars=10**9
    )  # all pages OCR

    run(src, tmp_path / "kb", IngestOptions(engine="cpu", pdf=pdf))

    con = duckdb.connect(str(tmp_path / "kb" / "kb.duckdb"), read_only=True)
    try:
        status = con.execute("SELECT status, error FROM documents").fetchall()
        pages = con.execute("SELECT route, engine, status, route_reason FROM pages").fetchall()
        text = con.execute("SELECT string_agg(text, ' ') FROM blocks").fetchone()[0]
    finally:
        con.close()
    assert status == [("ingested", None)]
    assert [p[:3] for p in pages] == [("ocr", "cpu", "ok")]
    assert "Health" in text and "Outlay" in text  # Tesseract read the rendered (decrypted) page


@pytest.mark.corpus
def test_the_cli_takes_a_passwords_file_and_prints_no_password(corpus: Path, tmp_path: Path):
    src = tmp_path / "in"
    src.mkdir()
    rel = "pdfminer/samples/encryption/aes-256-r6.pdf"
    shutil.copy(corpus / rel, src / "secret.pdf")
    secrets_file = tmp_path / "passwords.json"
    secrets_file.write_text(json.dumps({"secret.pdf": KNOWN[rel][0]}), encoding="utf-8")
    kb = tmp_path / "kb"
    done = subprocess.run(
        [sys.executable, "-m", "chandra_ocr.cli", "-v", "run", str(src), "--kb", str(kb), "--engine", "text",
         "--settle-seconds", "0", "--passwords-file", str(secrets_file)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert "documents: 1 ingested;" in done.stdout
    assert KNOWN[rel][0] not in done.stdout + done.stderr
