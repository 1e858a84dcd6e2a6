"""The package registers its Airflow plugins once, under README's editable install and under a wheel.

An editable install of a package under ``plugins/`` left ``plugins/chandra_ocr_airflow.egg-info`` on
``sys.path`` beside the installed ``.dist-info``: Airflow found the ``airflow.plugins`` entry point in
both and showed "Plugin 'chandra_ocr_knowledge_base' already registered" as an import error.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PLUGINS = {"chandra_ocr_knowledge_base", "chandra_ocr_run_notes"}
REPORT = (
    "import json; from airflow import plugins_manager as m; "
    "print(json.dumps({'names': [p['name'] for p in m.get_plugin_info()], 'errors': m.get_import_errors()}))"
)


def plugin_report(python: Path, home: Path) -> dict:
    """The plugins a fresh Airflow (``AIRFLOW_HOME`` = ``home``) of ``python``'s environment loads, and
    its plugin import errors; run from the repository, as README's user runs ``airflow``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "CHANDRA_OCR_", "PYTHON"))}
    env |= {"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    done = subprocess.run(
        [str(python), "-c", REPORT], cwd=REPO, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_editable_install_registers_each_plugin_once(tmp_path: Path) -> None:
    found = plugin_report(Path(sys.executable), tmp_path / "airflow")
    assert found["errors"] == {}, found
    assert sorted(n for n in found["names"] if n in PLUGINS) == sorted(PLUGINS), found


@pytest.mark.slow
def test_a_wheel_install_registers_each_plugin_once(tmp_path: Path) -> None:
    """A wheel of the package, installed with Airflow (``[airflow]``, constraints.txt) into a new venv."""
    uv = shutil.which("uv", path=str(Path(sys.executable).parent))
    if uv is None:
        pytest.skip("uv is not installed in this venv (`make` installs it)")
    dist, venv = tmp_path / "dist", tmp_path / "venv"
    built = subprocess.run([uv, "build", "-q", "--wheel", "-o", str(dist), str(REPO)],
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("*.whl")
    for cmd in ([uv, "venv", "-q", "-p", sys.executable, str(venv)],
                [uv, "pip", "install", "-q", "-p", str(venv / "bin" / "python"), "-c",
                 str(REPO / "constraints.txt"), f"{wheel}[airflow]"]):  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
    found = plugin_report(venv / "bin" / "python", tmp_path / "airflow")
    assert found["errors"] == {}, found
    assert sorted(n for n in found["names"] if n in PLUGINS) == sorted(PLUGINS), found
