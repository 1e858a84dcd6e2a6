"""The DAG files import cleanly and have the shape the README promises; the provider is registered."""

from __future__ import annotations

import warnings
from datetime import timedelta

from airflow_runs import DAGS


def test_every_dag_file_imports_without_errors_or_deprecation_warnings():
    from airflow.dag_processing.dagbag import DagBag

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    assert sorted(bag.dag_ids) == ["chandra_ocr_backfill", "chandra_ocr_ingest", "chandra_ocr_vector_feed"]
    ours = [w for w in caught if "chandra_ocr" in w.filename or str(DAGS) in w.filename]
    deprecations = [
        w for w in caught if issubclass(w.category, DeprecationWarning | PendingDeprecationWarning)
    ]
    assert ours == [] and deprecations == [], [str(w.message) for w in ours + deprecations]
    assert len(list(DAGS.glob("*.py"))) == len(bag.dag_ids)  # every file defines a DAG


def test_ingest_and_backfill_share_one_graph_mapped_over_batches():
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(DAGS))
    ingest, backfill = bag.dags["chandra_ocr_ingest"], bag.dags["chandra_ocr_backfill"]
    assert sorted(ingest.task_dict) == [
        "batch.assemble", "batch.compress", "batch.extract", "discover", "load", "preflight", "report",
    ]  # fmt: skip
    assert set(backfill.task_dict) == set(ingest.task_dict) | {
        "continue"
    }  # the next run, while batches are left
    assert backfill.get_task("report").downstream_task_ids == {"continue"}
    assert ingest.catchup is False and ingest.max_active_runs == 1
    assert backfill.schedule is None and ingest.schedule == "@daily"
    assert set(backfill.params) == {
        "source", "kb", "engine", "preset", "batch_pages",
        "modified_since", "modified_until", "max_documents", "reprocess",
        "source_conn_id", "rehash", "fail_on_incomplete", "backfill_batches_done", "backfill_batches_total",
    }  # fmt: skip
    ocr = ingest.get_task("batch.extract")
    assert (ocr.pool, ocr.queue, ocr.retry_exponential_backoff) == ("chandra_ocr_gpu", "gpu", 2.0)
    assert ocr.execution_timeout == timedelta(hours=6)
    group = ocr.get_closest_mapped_task_group()  # mapped per batch: compress → extract → assemble
    assert group is not None and group.group_id == "batch"
    assert [op.task_id for op in group.iter_mapped_dependencies()] == ["discover"]
    assert ingest.get_task("batch.compress").upstream_task_ids == {"discover", "preflight"}
    load = ingest.get_task("load")
    assert load.pool == "chandra_ocr_loader" and [a.name for a in load.outlets] == ["chandra_ocr_kb"]
    assert load.downstream_task_ids == {"report"} and not ingest.get_task("report").downstream_task_ids
    assert load.progress is not None  # discover's share of a backfill: "N of M batches done"


def test_vector_feed_runs_on_the_knowledge_base_asset():
    from airflow.dag_processing.dagbag import DagBag

    feed = DagBag(dag_folder=str(DAGS)).dags["chandra_ocr_vector_feed"]
    assert [a.name for a in feed.schedule] == ["chandra_ocr_kb"]
    assert feed.get_task("export").pool == "chandra_ocr_loader"


def test_the_provider_registers_the_vllm_connection_type():
    from airflow.sdk.providers_manager_runtime import ProvidersManagerTaskRuntime

    manager = ProvidersManagerTaskRuntime()
    assert "chandra-ocr-airflow" in manager.providers
    hook = manager.hooks["vllm"]
    assert hook is not None and hook.hook_class_name == "chandra_ocr.airflow.hooks.VllmHook"
    assert hook.connection_type == "vllm"
