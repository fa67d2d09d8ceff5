"""The Lambda entry: read the config, act (guard.handle), and re-invoke itself when a stop flow must go on."""

from __future__ import annotations

import json
import os
from typing import Any

import boto3
from botocore.config import Config

from run_guard.config import load_config
from run_guard.guard import Clients, handle


def handler(event: Any, context: Any) -> dict[str, Any]:
    config = load_config(os.environ)  # ConfigError names every bad variable
    session = boto3.session.Session()
    retries = Config(retries={"mode": "standard", "max_attempts": 8})  # ride out short throttling bursts
    clients = Clients(
        ec2=session.client("ec2", config=retries),
        fsx=session.client("fsx", config=retries),
        s3=session.client("s3", config=retries),
    )
    result = handle(event, config, clients, remaining_millis=context.get_remaining_time_in_millis)
    if result.get("continue"):
        session.client("lambda", config=retries).invoke(
            FunctionName=context.invoked_function_arn,
            InvocationType="Event",
            Payload=json.dumps(result["continue"]).encode(),
        )
        result["reinvoked"] = True
    return result
