"""The GCP run guard: a Cloud Run function that stops a training run's spend on its completion marker and from its
expires-at on, deployed as-is from this folder (never imports the project).

Modules: `config` (environment and timing), `api` (the REST client, shared with the lifecycle's GCP adapter),
`compute` and `lustre` (the steps and decisions the lifecycle shares), `guard` (one step per event), `handler`
(logging and retries), `main` (the function's entry point).
"""
