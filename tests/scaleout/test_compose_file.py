"""docker/: the compose file, its .env.example and the Dockerfiles agree with each other and the code.

Docker cannot run here. What can be checked offline is: the compose file's structure (queues,
GPU reservations, one shared Celery/DB configuration, the pre-wired ``vllm`` connection), that
``.env.example`` defines every variable the file uses, that the Dockerfiles copy what exists and
install extras that exist, and — where a Docker Compose v2 client is installed — ``docker compose
config`` on the file with ``.env.example``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import yaml

from chandra_ocr.airflow.settings import DagSettings

DOCKER = Path(__file__).resolve().parents[2] / "docker"
REPO = DOCKER.parent
COMPOSE = DOCKER / "docker-compose.yml"
ENV_EXAMPLE = DOCKER / ".env.example"
AIRFLOW_SERVICES = {"airflow-init", "airflow-apiserver", "airflow-scheduler", "airflow-dag-processor",
                    "airflow-triggerer", "airflow-worker", "airflow-worker-gpu"}  # fmt: skip


def _env_example() -> dict[str, str]:
    pairs = (line.split("=", 1) for line in ENV_EXAMPLE.read_text().splitlines() if "=" in line)
    return {k.strip(): v.strip() for k, v in pairs if not k.lstrip().startswith("#")}


def _interpolate(value: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?message}`` with ``env``."""

    def one(match: re.Match) -> str:
        name, op, arg = match.group(1), match.group(2), match.group(3)
        if env.get(name):
            return env[name]
        return arg if op == ":-" else ""

    return re.sub(r"\$\{([A-Z0-9_]+)(?:(:-|:\?)([^}]*))?\}", one, value)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE.read_text())


def test_env_example_defines_every_variable_the_compose_file_uses():
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", COMPOSE.read_text()))
    assert used and used <= set(_env_example()), sorted(used - set(_env_example()))


def test_services_queues_and_gpu_reservations(compose):
    services = compose["services"]
    assert set(services) == AIRFLOW_SERVICES | {"postgres", "redis", "vllm"}
    default, gpu = services["airflow-worker"]["command"], services["airflow-worker-gpu"]["command"]
    assert default[:2] == ["celery", "worker"] and default[default.index("--queues") + 1] == "default"
    gpu_queue = _interpolate(gpu[gpu.index("--queues") + 1], _env_example())
    assert gpu_queue == DagSettings().gpu_queue  # the queue the DAG's OCR tasks go to
    for name in ("airflow-worker-gpu", "vllm"):
        (device,) = services[name]["deploy"]["resources"]["reservations"]["devices"]
        assert device["driver"] == "nvidia" and device["capabilities"] == ["gpu"]
    assert "deploy" not in services["airflow-worker"]
    assert (
        services["vllm"]["profiles"] == ["vllm-server"] and "profiles" not in services["airflow-worker-gpu"]
    )


def test_every_airflow_service_shares_the_celery_and_database_settings(compose):
    services, env = compose["services"], _env_example()
    first = services["airflow-scheduler"]["environment"]
    for name in AIRFLOW_SERVICES:
        assert services[name]["environment"] == first, name
    assert first["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert urlsplit(_interpolate(first["AIRFLOW__CELERY__BROKER_URL"], env)).hostname == "redis"
    for key in ("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "AIRFLOW__CELERY__RESULT_BACKEND"):
        url = urlsplit(_interpolate(first[key], env))
        assert (url.hostname, url.port, url.path) == ("postgres", 5432, "/airflow"), key
    api = urlsplit(first["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert api.hostname == "airflow-apiserver" and "8080:8080" in _interpolate(
        services["airflow-apiserver"]["ports"][0], env
    )
    assert services["airflow-init"]["command"] == ["python", "-m", "chandra_ocr.airflow.setup"]


def test_the_vllm_connection_points_at_the_vllm_service(compose):
    env = _env_example()
    services = compose["services"]
    conn = urlsplit(_interpolate(services["airflow-worker"]["environment"]["AIRFLOW_CONN_VLLM_DEFAULT"], env))
    served = [_interpolate(a, env) for a in services["vllm"]["command"]]
    assert services["vllm"]["entrypoint"] == ["vllm", "serve"]
    assert (
        conn.scheme == "vllm"
        and conn.hostname == "vllm"
        and str(conn.port) == served[served.index("--port") + 1]
    )
    assert conn.password == served[served.index("--api-key") + 1] == env["VLLM_API_KEY"]
    assert parse_qs(conn.query)["model"] == [served[0]]


@pytest.mark.parametrize("dockerfile", ["Dockerfile.airflow", "Dockerfile.gpu-worker"])
def test_dockerfiles_copy_what_exists_and_install_known_extras(dockerfile):
    text = (DOCKER / dockerfile).read_text()
    assert re.search(r"^FROM \$\{AIRFLOW_IMAGE\}", text, re.M)
    assert re.search(r"^ARG AIRFLOW_IMAGE=apache/airflow:3\.3\.\d+-python3\.11$", text, re.M)
    ignore = (DOCKER / f"{dockerfile}.dockerignore").read_text().splitlines()
    allowed = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    for sources in re.findall(r"^COPY (?:--\S+ )*(.+) \S+$", text, re.M):
        for source in sources.split():
            assert (REPO / source).exists() and source.rstrip("/") in allowed, source
    extras = set(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    for group in re.findall(r"/opt/chandra_ocr\[([a-z,-]+)\]", text):
        assert set(group.split(",")) <= extras
    assert "ghostscript" in text and "tesseract-ocr-eng" in text


def _compose_client() -> list[str] | None:
    for argv in (["docker", "compose"], ["docker-compose"]):
        if shutil.which(argv[0]) and subprocess.run([*argv, "version"], capture_output=True).returncode == 0:
            return argv
    return None


def test_docker_compose_config_accepts_the_file():
    client = _compose_client()
    if client is None:
        pytest.skip("no Docker Compose v2 client here (docker compose / docker-compose)")
    for profile in ([], ["--profile", "vllm-server"]):
        result = subprocess.run(
            [*client, "-f", str(COMPOSE), "--env-file", str(ENV_EXAMPLE), *profile, "config", "-q"],
            capture_output=True, text=True,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
