"""The run guard: the Lambda that stops a training run's spend on its completion marker and at its
expires-at, deployed as-is from this folder (stdlib and boto3 only; never imports `infra`).

Modules: `config` (environment and timing), `actions` (the boto3 steps, reused by the CLI),
`guard` (the completion and expiry flows), `handler` (the Lambda entry).
"""
