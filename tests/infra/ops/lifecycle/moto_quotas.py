"""Emulator extension for Service Quotas, loaded by moto_launcher.py (nothing here knows mlinfra's code).

moto 5.2.5 implements GetServiceQuota and ListAWSDefaultServiceQuotas for service code `vpc` only
(moto/servicequotas/models.py: its default quotas, "Network interfaces per Region" L-DF5E4CA3 = 5000 among them),
answers NoSuchResourceException for every other service, `ec2` included, and has no GetAWSDefaultServiceQuota.
- A test seeds a quota's value, as an account whose quota was raised (or lowered) has one; "Default": true seeds
  AWS's default instead (what GetAWSDefaultServiceQuota answers; GetServiceQuota then still has none applied):
    POST /moto-api/servicequotas/quota  {"Region", "ServiceCode", "QuotaCode", "QuotaName", "Value", "Default"}
  Both answer it in the shape of the AWS CLI User Guide's get-service-quota example (ServiceCode, ServiceName,
  QuotaArn, QuotaCode, QuotaName, Value, Unit, Adjustable, GlobalQuota).
- GetAWSDefaultServiceQuota: a seeded default, else moto's own defaults (vpc), else NoSuchResourceException, as
  the API reference has it.
A reset of the server drops the seeded values with the backends.
"""

from __future__ import annotations

import json
from typing import Any

from moto.core import DEFAULT_ACCOUNT_ID
from moto.servicequotas.exceptions import NoSuchResource
from moto.servicequotas.models import ServiceQuotasBackend, servicequotas_backends
from moto.servicequotas.responses import ServiceQuotasResponse

SERVICE_NAMES = {
    "ec2": "Amazon Elastic Compute Cloud (Amazon EC2)",
    "vpc": "Amazon Virtual Private Cloud (Amazon VPC)",
}


def _seeded(backend: ServiceQuotasBackend, kind: str) -> dict[tuple[str, str], dict[str, Any]]:
    if not hasattr(backend, f"mlinfra_{kind}"):
        setattr(backend, f"mlinfra_{kind}", {})
    return getattr(backend, f"mlinfra_{kind}")  # type: ignore[no-any-return]


def _applied(backend: ServiceQuotasBackend) -> dict[tuple[str, str], dict[str, Any]]:
    return _seeded(backend, "applied")


_original_get = ServiceQuotasBackend.get_service_quota


def get_service_quota(self: ServiceQuotasBackend, service_code: str, quota_code: str) -> dict[str, Any]:
    applied = _applied(self).get((service_code, quota_code))
    return applied if applied is not None else _original_get(self, service_code, quota_code)


def get_aws_default_service_quota(self: ServiceQuotasResponse) -> str:
    params = json.loads(self.body)
    service, code = str(params.get("ServiceCode")), str(params.get("QuotaCode"))
    quota = _seeded(self.backend, "defaults").get((service, code))
    if quota is None:
        try:
            defaults = self.backend.list_aws_default_service_quotas(service)
        except NoSuchResource:
            defaults = []
        quota = next((q for q in defaults if q["QuotaCode"] == code), None)
    if quota is None:
        raise NoSuchResource
    return json.dumps({"Quota": quota})


def set_quota(request: Any, full_url: str, headers: Any) -> tuple[int, dict, str]:
    """Admin endpoint: the applied value of a quota in a region."""
    body = json.loads(request.get_data() or b"{}")
    missing = [k for k in ("Region", "ServiceCode", "QuotaCode", "QuotaName", "Value") if k not in body]
    if missing:
        return 400, {}, json.dumps({"error": f"missing {missing}"})
    backend = servicequotas_backends[DEFAULT_ACCOUNT_ID][body["Region"]]
    service, code = body["ServiceCode"], body["QuotaCode"]
    quota = {
        "ServiceCode": service,
        "ServiceName": SERVICE_NAMES.get(service, service),
        "QuotaArn": f"arn:aws:servicequotas:{body['Region']}:{DEFAULT_ACCOUNT_ID}:{service}/{code}",
        "QuotaCode": code,
        "QuotaName": body["QuotaName"],
        "Value": float(body["Value"]),
        "Unit": "None",
        "Adjustable": True,
        "GlobalQuota": False,
    }
    _seeded(backend, "defaults" if body.get("Default") else "applied")[(service, code)] = quota
    return 200, {}, json.dumps({"Quota": quota})


def install(url_paths: dict[str, Any]) -> None:
    ServiceQuotasBackend.get_service_quota = get_service_quota  # type: ignore[method-assign]
    ServiceQuotasResponse.get_aws_default_service_quota = get_aws_default_service_quota  # type: ignore[attr-defined]
    url_paths["{0}/moto-api/servicequotas/quota"] = set_quota
