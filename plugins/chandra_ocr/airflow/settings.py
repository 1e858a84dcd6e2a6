"""The DAGs' settings, each with the environment variable that gives its default.

Two kinds: *DAG settings* (``DagSettings``) shape the DAG itself (schedule, pools, queue, retries)
and are read from the environment when the DAG file is parsed; *run settings* (source, KB, engine,
…; declared in chandra_ocr/run_settings.py, with the CLI's flags) are resolved once per run, by the
``preflight`` task, in this order: the run's Param (when not empty) → the JSON Airflow Variable
``chandra_ocr`` → the environment variable → the default.
Relative source and KB paths resolve against ``$CHANDRA_OCR_BASE_DIR``, else ``$AIRFLOW_HOME``
(else ``~/airflow``, Airflow's own default), never against the working folder of a process.
This module does not import Airflow; the tasks pass in the Params, the Variable and the environment.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chandra_ocr.config import IngestOptions
from chandra_ocr.errors import ConfigError
from chandra_ocr.run_settings import SETTINGS, check_keys, convert, json_object, positive, run_env
from chandra_ocr.sources.entry import is_glob, is_url
from chandra_ocr.store.layout import KbLayout

if TYPE_CHECKING:  # the stages import PyMuPDF and more: not while Airflow parses a DAG file
    from chandra_ocr.stages import RunContext

VARIABLE = "chandra_ocr"  # JSON Variable with run settings (the settings with an environment variable)
POOLS_VARIABLE = "chandra_ocr_pools"  # written by the setup command: {pool name: slots}
# JSON {doc_id | path ending | file name: password} of encrypted PDFs (chandra_ocr.pdf.passwords), read by
# the OCR task only: never part of a manifest or an XCom; the values are masked in task logs.
PASSWORDS_VARIABLE = "chandra_ocr_pdf_passwords"

BASE_DIR_ENV = "CHANDRA_OCR_BASE_DIR"  # what relative source and KB paths resolve against
# The run settings Airflow resolves (a Param, or a Variable key and an environment variable): run_settings.py.
AIRFLOW_SETTINGS = tuple(s for s in SETTINGS if s.param or s.env)


@dataclass(frozen=True)
class DagSettings:
    """What the DAG files are built from (read at parse time; each field has a CHANDRA_OCR_* variable)."""

    schedule: str | None = "@daily"  # CHANDRA_OCR_SCHEDULE; "none" → only manual runs
    gpu_pool: str = "chandra_ocr_gpu"  # CHANDRA_OCR_GPU_POOL
    gpu_slots: int = 1  # CHANDRA_OCR_GPU_SLOTS: the GPUs the GPU pool is for
    # CHANDRA_OCR_EXTRACT_TASKS_PER_GPU: extract tasks that share one GPU's warm model at once (the pool
    # gets gpu_slots × this many slots), so one batch's tail overlaps the next batches' pages; None: the
    # setup command derives it from the engine's capacity (chandra_ocr.ocr.capacity)
    extract_tasks_per_gpu: int | None = None
    model_idle_timeout_s: float = 600.0  # CHANDRA_OCR_MODEL_IDLE_TIMEOUT_S: a warm model's idle time; 0: none
    loader_pool: str = "chandra_ocr_loader"  # CHANDRA_OCR_LOADER_POOL (1 slot: one DuckDB writer)
    gpu_queue: str = "gpu"  # CHANDRA_OCR_GPU_QUEUE: Celery/Edge queue of the GPU workers
    retries: int = 2  # CHANDRA_OCR_RETRIES: for the OCR and I/O tasks
    retry_delay_s: float = 120.0  # CHANDRA_OCR_RETRY_DELAY_S: first delay, doubled per retry
    ocr_timeout_min: float = 360.0  # CHANDRA_OCR_OCR_TIMEOUT_MIN: one batch's OCR task

    def __post_init__(self) -> None:
        if self.extract_tasks_per_gpu is not None and self.extract_tasks_per_gpu < 1:
            raise ConfigError(
                f"CHANDRA_OCR_EXTRACT_TASKS_PER_GPU must be ≥ 1, got {self.extract_tasks_per_gpu}; "
                "leave it unset to size it from the model's capacity"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> DagSettings:
        """Defaults overridden by ``CHANDRA_OCR_<FIELD>`` variables (values converted to the field's type)."""
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            raw = environ.get(f"CHANDRA_OCR_{f.name.upper()}")
            if raw is None or raw == "":
                continue
            if f.name == "schedule":
                values[f.name] = None if raw.lower() in ("none", "null") else raw
            else:  # a field without a default value (None) holds a number
                values[f.name] = convert(f.name, raw, int if f.default is None else type(f.default))
        return cls(**values)

    def retry_args(self) -> dict[str, Any]:
        """How every task retries (the DAGs' ``default_args``)."""
        return {
            "retries": self.retries,
            "retry_delay": timedelta(seconds=self.retry_delay_s),
            "retry_exponential_backoff": 2.0,
        }

    def gpu_task_args(self) -> dict[str, Any]:
        """Where the OCR (extract) task runs, how it retries and for how long at most."""
        return self.retry_args() | {
            "pool": self.gpu_pool,
            "queue": self.gpu_queue,
            "execution_timeout": timedelta(minutes=self.ocr_timeout_min),
        }

    def pools(self, tasks_per_gpu: int) -> dict[str, int]:
        """Pool name → slots, as the setup command creates them (``tasks_per_gpu``: its resolved figure)."""
        return {self.gpu_pool: self.gpu_slots * tasks_per_gpu, self.loader_pool: 1}


@dataclass(frozen=True)
class RunConfig:
    """The resolved settings of one DAG run; travels between tasks as a small dict (XCom)."""

    source: str
    kb: str
    vllm_conn_id: str
    options: dict[str, Any] = field(default_factory=dict)  # IngestOptions.to_dict()
    modified_since: str | None = None
    modified_until: str | None = None
    max_documents: int | None = None
    started_at: str | None = None  # when the run's preflight resolved these settings (ISO)
    source_conn_id: str | None = None  # the Airflow connection of an object-store source
    # where each setting came from: "Param", "Variable 'chandra_ocr'", "$CHANDRA_OCR_…", "default"
    origins: dict[str, str] = field(default_factory=dict)

    def ingest_options(self) -> IngestOptions:
        return IngestOptions.from_dict(self.options)

    def layout(self) -> KbLayout:
        return KbLayout(Path(self.kb))

    def context(self, run_id: str, **kwargs: Any) -> RunContext:
        """The stages' context for one task of the run ``run_id`` (``kwargs``: engine, passwords)."""
        from chandra_ocr.stages import RunContext

        started = datetime.fromisoformat(self.started_at) if self.started_at else datetime.now(UTC)
        kwargs.setdefault("series", _task_dag_id())
        return RunContext(self.layout(), self.ingest_options(), run_id, started, **kwargs)

    def filters(self) -> dict[str, Any]:
        """Keyword filters for the discover stage (only those that are set)."""
        out: dict[str, Any] = {}
        if self.max_documents is not None:
            out["limit"] = self.max_documents
        if self.modified_since:
            out["modified_since"] = _epoch(self.modified_since)
        if self.modified_until:
            out["modified_until"] = _epoch(self.modified_until)
        return out

    def describe(self) -> str:
        """The settings a task works with, for its log: the KB first, then what shapes the run."""
        o = self.ingest_options()
        window = f" modified_since={self.modified_since}" if self.modified_since else ""
        window += f" modified_until={self.modified_until}" if self.modified_until else ""
        return (
            f"kb={self.kb} source={self.source} engine={o.engine} preset={o.preset} "
            f"batch_pages={o.batch_pages} max_documents={self.max_documents or 'all'} "
            f"settle_seconds={o.pdf.settle_seconds:g} reprocess={o.reprocess} "
            f"fail_on_incomplete={o.fail_on_incomplete}{window}"
        )

    def provenance(self) -> str:
        """Each run setting with its value and where it came from (Param, Variable, environment,
        default), one per line, for the preflight's log."""
        o = self.ingest_options()
        values: dict[str, Any] = {
            "source": self.source, "kb": self.kb, "vllm_conn_id": self.vllm_conn_id,
            "source_conn_id": self.source_conn_id, "max_documents": self.max_documents,
            "modified_since": self.modified_since, "modified_until": self.modified_until,
        }  # fmt: skip
        own, defaults = {s.option for s in AIRFLOW_SETTINGS}, _leaves(IngestOptions().to_dict())
        # `options`: the options it changed from the library's defaults (besides the settings' own)
        values["options"] = {
            k: v for k, v in _leaves(o.to_dict()).items() if k not in own and v != defaults[k]
        }
        lines = []
        for s in AIRFLOW_SETTINGS:
            value = values[s.name] if s.name in values else s.get(o)
            lines.append(f"  {s.name} = {value!r}  ({self.origins.get(s.name, 'default')})")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, values: Mapping[str, Any]) -> RunConfig:
        return cls(**values)


def resolve_run_config(
    params: Mapping[str, Any], variable: str | Mapping[str, Any] | None, environ: Mapping[str, str]
) -> RunConfig:
    """Resolve one run's settings (Param → Variable → environment → default); raises ConfigError.

    ``variable`` is the Variable's text as Airflow stores it (parsed here: ``variable_settings``), or
    its parsed value. Every value is checked the same way, wherever it comes from (``Setting.coerce``);
    the config records where each came from (``origins``)."""
    if variable is None or isinstance(variable, str):
        variable = variable_settings(variable)
    check_keys(variable, run_env(), f"key(s) in Variable {VARIABLE!r}")
    given: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for s in AIRFLOW_SETTINGS:
        param = params.get(s.name)
        if param not in (None, "") and not (param is False and s.env is None):  # unticked: the default
            given[s.name], origins[s.name] = s.coerce(param, f"Param {s.name!r}"), "Param"
        elif s.name in variable:
            where = f"Variable {VARIABLE!r}"
            given[s.name], origins[s.name] = s.coerce(variable[s.name], f"{where} key {s.name!r}"), where
        elif s.env and environ.get(s.env):
            given[s.name], origins[s.name] = s.convert(environ[s.env]), f"${s.env}"
    value = {s.name: given.get(s.name, s.default) for s in AIRFLOW_SETTINGS}
    base = base_dir(environ)
    return RunConfig(
        source=_absolute(value["source"], base),
        kb=_absolute(value["kb"], base),
        vllm_conn_id=str(value["vllm_conn_id"]),
        source_conn_id=str(value["source_conn_id"]) or None,
        options=_ingest_options(given, value["options"]).to_dict(),
        modified_since=_iso(value["modified_since"], "modified_since"),
        modified_until=_iso(value["modified_until"], "modified_until"),
        max_documents=positive(value["max_documents"], "max_documents"),
        started_at=datetime.now(UTC).isoformat(),
        origins={s.name: origins.get(s.name, "default") for s in AIRFLOW_SETTINGS},
    )


def variable_settings(text: str | None) -> dict[str, Any]:
    """The run settings in the text of the Variable ``chandra_ocr`` (none when it is not set). Text that is
    not a JSON object fails the run at preflight, naming the line and column: a Variable Airflow could not
    read would otherwise leave the run on defaults."""
    if text is None or not text.strip():
        return {}
    try:
        return json_object(text, f"Variable {VARIABLE!r}")
    except ConfigError as e:
        raise ConfigError(
            f"{e}; nothing ran: fix it under Admin → Variables or with `airflow variables set {VARIABLE} "
            "'{...}'`"
        ) from None


def check_run_conf(conf: Mapping[str, Any], params: Iterable[str], dag_id: str) -> None:
    """The keys of a run's conf are Params of its DAG (``params``): a misspelt Param would otherwise be
    dropped and the run go on with the Variable's or the default value; raises ConfigError."""
    try:
        check_keys(conf, params, f"Param(s) in the conf of this {dag_id} run")
    except ConfigError as e:
        raise ConfigError(f"{e}; nothing ran") from None


def _ingest_options(given: Mapping[str, Any], extra: Any) -> IngestOptions:
    """``options`` (further IngestOptions keys) with the settings given at their fields: a setting given
    overrides the same key of ``options``; a false boolean leaves it (either turns it on)."""
    if not isinstance(extra, Mapping):
        raise ConfigError(f"options must be a JSON object, got {extra!r}")
    values = dict(extra)
    for s in AIRFLOW_SETTINGS:
        if s.option is None or s.name not in given or (s.type is bool and not given[s.name]):
            continue
        s.put(values, given[s.name])
    return IngestOptions.from_dict(values)


def _leaves(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested option dicts → {"pdf.workers": 2, ...} (the pdf and chunk groups as dotted names)."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        if key in ("pdf", "chunk") and isinstance(value, Mapping):
            out |= _leaves(value, f"{prefix}{key}.")
        else:
            out[f"{prefix}{key}"] = value
    return out


def base_dir(environ: Mapping[str, str]) -> Path:
    """Where relative paths resolve: $CHANDRA_OCR_BASE_DIR, else $AIRFLOW_HOME, else ~/airflow."""
    return Path(environ.get(BASE_DIR_ENV) or environ.get("AIRFLOW_HOME") or "~/airflow").expanduser()


def _absolute(path: str, base: Path) -> str:
    """Folder paths are resolved once, against ``base``, so every task of a run agrees on them."""
    text = str(path)
    if is_url(text):  # an object store (or file://) URL: absolute already
        return text
    anchored = Path(text).expanduser()
    anchored = anchored if anchored.is_absolute() else base / anchored
    if is_glob(text):  # a glob: keep it, anchored like a path
        return str(anchored)
    return str(anchored.resolve())


def _epoch(iso: str) -> float:
    """Seconds since the epoch of an ISO date/time; one without an offset is UTC."""
    moment = datetime.fromisoformat(iso)
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def _iso(value: Any, name: str) -> str | None:
    if value in (None, ""):
        return None
    try:
        return datetime.fromisoformat(str(value)).isoformat()
    except ValueError as e:
        raise ConfigError(f"{name} must be an ISO date or date-time, got {value!r}") from e


def _task_dag_id() -> str | None:
    """The DAG of the task running now: its runs never overlap (``max_active_runs=1``), which tells a
    rerun that its failed predecessor's claims are free (store/claims.py); None outside a task."""
    from airflow.sdk import get_current_context

    try:
        return get_current_context()["dag"].dag_id
    except RuntimeError:  # not within a task's execution (a direct call, as some tests make)
        return None
