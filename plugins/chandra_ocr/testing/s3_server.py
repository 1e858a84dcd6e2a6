"""An S3 emulator for the object-storage tests and bench/archive_discovery.py: moto's standalone server
(``python -m moto.server``), a real HTTP server on 127.0.0.1 in its own process, spoken to through
the client stack users run (s3fs/aiobotocore, boto3, Airflow's Amazon provider).

It checks request signatures (moto's IAM auth, on after the first three requests, which create the
user whose keys are valid), so that wrong credentials are refused as a real store refuses them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from chandra_ocr.ocr.server_process import free_port
from chandra_ocr.testing.processes import stop_process_group

POLICY = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}


@dataclass(frozen=True)
class S3Server:
    endpoint: str
    key_id: str
    secret: str

    def env(self) -> dict[str, str]:
        """The standard AWS environment a CLI user sets for this store."""
        return {
            "AWS_ACCESS_KEY_ID": self.key_id,
            "AWS_SECRET_ACCESS_KEY": self.secret,
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self, key_id: str | None = None, secret: str | None = None):
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=key_id or self.key_id,
            aws_secret_access_key=secret or self.secret,
            region_name="us-east-1",
        )


@contextmanager
def s3_server(ready_s: float = 60.0) -> Iterator[S3Server]:
    """Start the emulator, wait (up to ``ready_s``) until it answers, create a user; stop it after."""
    import boto3

    port = free_port()
    env = os.environ | {"INITIAL_NO_AUTH_ACTION_COUNT": "3", "MOTO_PORT": str(port)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + ready_s
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the S3 emulator did not start on {endpoint}") from None
                time.sleep(0.2)
        iam = boto3.client(
            "iam", endpoint_url=endpoint, region_name="us-east-1",
            aws_access_key_id="bootstrap", aws_secret_access_key="bootstrap",
        )  # fmt: skip
        iam.create_user(UserName="chandra")
        key = iam.create_access_key(UserName="chandra")["AccessKey"]
        iam.put_user_policy(UserName="chandra", PolicyName="s3", PolicyDocument=json.dumps(POLICY))
        yield S3Server(endpoint, key["AccessKeyId"], key["SecretAccessKey"])
    finally:
        stop_process_group(proc, grace_s=10)
