from chandra_ocr.manifest import Batch, DocRef, plan_batches, run_metrics


def _docs(*pages):
    return [
        DocRef(doc_id=f"{i:064x}", source=f"/in/{i}.pdf", bytes=100, n_pages=n) for i, n in enumerate(pages)
    ]


def test_batches_respect_the_page_budget_and_keep_order():
    batches = plan_batches(_docs(3, 4, 2, 10, 1), batch_pages=7)
    assert [[d.n_pages for d in b.docs] for b in batches] == [[3, 4], [2], [10], [1]]
    assert [d.doc_id for b in batches for d in b.docs] == [d.doc_id for d in _docs(3, 4, 2, 10, 1)]


def test_batches_come_out_even():
    """200 pages at 120 per batch: two batches of 100, not 120 and 80."""
    batches = plan_batches(_docs(*[4] * 50), batch_pages=120)
    assert [sum(d.n_pages for d in b.docs) for b in batches] == [100, 100]


def test_batch_ids_are_deterministic_and_distinct():
    a = plan_batches(_docs(1, 1, 1), batch_pages=1)
    b = plan_batches(_docs(1, 1, 1), batch_pages=1)
    assert [x.batch_id for x in a] == [x.batch_id for x in b]
    assert len({x.batch_id for x in a}) == 3


def test_manifest_round_trips_as_plain_json_values():
    import json

    batch = plan_batches(_docs(2, 2), batch_pages=10)[0]
    batch.engine, batch.model, batch.counts = "cpu", "tesseract", {"ocr_pages": 2}
    batch.docs[0].prompt_tokens, batch.docs[0].output_tokens = 900, 40
    again = Batch.from_dict(json.loads(json.dumps(batch.to_dict())))
    assert again == batch


def test_run_metrics_sum_tokens_counts_and_stage_seconds_over_batches():
    first, second = plan_batches(_docs(2, 2, 3), batch_pages=4)
    for batch, seconds in ((first, 1.5), (second, 0.5)):
        batch.counts, batch.seconds = {"ocr_pages": len(batch.docs)}, {"extract": seconds}
        for doc in batch.docs:
            doc.prompt_tokens, doc.output_tokens = 1000 * doc.n_pages, 10 * doc.n_pages
    metrics = run_metrics([first, second])
    assert (metrics["prompt_tokens"], metrics["output_tokens"]) == (7000, 70)
    assert metrics["ocr_pages"] == 3 and metrics["stage_seconds"] == {"extract": 2.0}
