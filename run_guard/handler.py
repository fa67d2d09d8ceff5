"""The Lambda entry: read the config, act (guard.handle), and re-invoke itself when an expiry must go on."""
from __future__ import annotations

import json
import os
from typing import Any

import boto3

from run_guard.config import load_config
from run_guard.guard import Clients, handle


def handler(event: Any, context: Any) -> dict[str, Any]:
    config = load_config(os.environ)  # ConfigError names every bad variable
    session = boto3.session.Session()
    clients = Clients(ec2=session.client("ec2"), fsx=session.client("fsx"), s3=session.client("s3"))
    result = handle(event, config, clients, remaining_millis=context.get_remaining_time_in_millis)
    if result.get("continue"):
        session.client("lambda").invoke(FunctionName=context.invoked_function_arn, InvocationType="Event",
                                        Payload=json.dumps(result["continue"]).encode())
        result["reinvoked"] = True
    return result
