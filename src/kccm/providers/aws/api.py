"""The AWS API as the provider uses it: the boto3 clients, error mapping and the call ledger.

boto3 is synchronous; every provider method is a plain ``def`` so the framework runs it in its
thread pool (boto3 clients are thread-safe). botocore retries transient errors itself
(standard mode, ``APIMaxAttempts`` attempts); what is still failing afterwards is mapped here:

- throttling codes -> :class:`~kccm.cloudprovider.Throttled`, so the call gate pauses that
  method group for everyone;
- quota and limit codes (``TooManyLoadBalancers``, ``TooManyTargetGroups``, ``*LimitExceeded``
  but the throttling ``RequestLimitExceeded``, ...) -> :class:`AWSQuotaExceeded`, a
  :class:`~kccm.cloudprovider.QuotaExceeded`: retrying does not help until the quota is raised;
- permission codes (``AccessDenied``, ``UnauthorizedOperation``, ``AuthFailure``, ...) ->
  :class:`AWSPermissionDenied`, a :class:`~kccm.cloudprovider.PermissionDenied`: the role
  kccm runs with lacks an IAM permission;
- anything else -> :class:`AWSAPIError` naming the operation, the code and AWS's message;
- an answer that is not an AWS response at all (an HTTP 500 with an HTML page from a proxy, an
  EC2-compatible cloud, stock moto 5 for ``DescribeInstanceTopology``): botocore raises
  ``ResponseParserError``, which is no ``BotoCoreError`` -> :class:`AWSAPIError` without a
  code, so every caller's handling of a failed call applies (issue 25: it escaped the
  topology fallback and kept Nodes tainted). Upstream's SDK returns such answers as an error
  like any other (``getAdditionalLabels`` in ``pkg/providers/v1/instances_v2.go`` ignores any
  error for a type not expected to answer).

Every request goes through :meth:`AWSAPI.call`, the single choke point: it records the
request in a :class:`~kccm.cloudprovider.apicalls.CloudAPICalls` ledger, as a read or a write
by its verb (``describe_*`` reads; ``create_*``, ``modify_*``, ``register_*``, ... write: see
:func:`~kccm.cloudprovider.apicalls.classify_by_verb`), so tests and benchmarks can assert that
an ensure with nothing changed makes no mutating call.

Credentials come from boto3's standard chain and are never logged: botocore's own loggers are
capped at INFO (its DEBUG output includes signed request headers).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import boto3
import botocore.config
import botocore.exceptions
import botocore.parsers

from kccm.cloudprovider import CloudProviderError, PermissionDenied, QuotaExceeded, Throttled
from kccm.cloudprovider.apicalls import CloudAPICalls, classify_by_verb
from kccm.providers.aws.config import AWSCloudConfig

__all__ = [
    "AWSAPI",
    "CLIENTS",
    "PERMISSION_CODES",
    "QUOTA_CODES",
    "THROTTLING_CODES",
    "AWSAPIError",
    "AWSPermissionDenied",
    "AWSQuotaExceeded",
    "error_code",
    "is_quota_code",
]

log = logging.getLogger(__name__)

THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestThrottled",
        "SlowDown",
        "PriorRequestNotComplete",
        "EC2ThrottledException",
    }
)
"""Error codes AWS uses for rate limiting (botocore's list, plus ELB's ``Throttling``)."""


QUOTA_CODES = frozenset(
    {
        "LimitExceeded",
        "LimitExceededException",
        "ServiceQuotaExceededException",
        "TooManyLoadBalancers",
        "TooManyTargetGroups",
        "TooManyListeners",
        "TooManyRules",
        "TooManyTargets",
        "TooManyRegistrationsForTargetId",
        "TooManyTags",
        "TooManyPolicies",
        "TooManyCertificates",
        "TooManyActions",
        "TooManyUniqueTargetGroupsPerLoadBalancer",
        "AddressLimitExceeded",
        "SecurityGroupLimitExceeded",
        "RulesPerSecurityGroupLimitExceeded",
        "TagLimitExceeded",
    }
)
"""Quota and service-limit codes of EC2, ELB and ELBv2; :func:`is_quota_code` also takes any
other ``TooMany*`` or ``*LimitExceeded`` code that is not a throttling one."""

PERMISSION_CODES = frozenset(
    {
        "AccessDenied",
        "AccessDeniedException",
        "UnauthorizedOperation",
        "AuthFailure",
        "InvalidClientTokenId",
        "UnrecognizedClientException",
        "SignatureDoesNotMatch",
        "ExpiredToken",
        "ExpiredTokenException",
        "OptInRequired",
    }
)
"""Codes AWS answers when the credentials may not make the call (or are not valid)."""


class AWSAPIError(CloudProviderError):
    """An AWS call failed; ``code`` is AWS's error code (empty for transport errors)."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class AWSQuotaExceeded(AWSAPIError, QuotaExceeded):
    """An AWS quota or limit refused the call (see :data:`QUOTA_CODES`)."""


class AWSPermissionDenied(AWSAPIError, PermissionDenied):
    """AWS refused the call for lack of permission (see :data:`PERMISSION_CODES`)."""


def is_quota_code(code: str) -> bool:
    if code in THROTTLING_CODES:
        return False
    return code in QUOTA_CODES or code.startswith("TooMany") or code.endswith("LimitExceeded")


def error_code(error: BaseException) -> str:
    """AWS's error code of a botocore ``ClientError`` (empty for anything else)."""
    if isinstance(error, botocore.exceptions.ClientError):
        return str(error.response.get("Error", {}).get("Code", ""))
    return ""


def _quiet_botocore() -> None:
    for name in ("botocore", "boto3", "urllib3"):
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.INFO:
            logger.setLevel(logging.INFO)


CLIENTS = ("ec2", "elb", "elbv2")
"""The boto3 clients the provider uses: EC2, Classic ELB and ELBv2 (upstream's ``ec2``,
``elb`` and ``elbv2`` services)."""


class AWSAPI:
    """The EC2, ELB and ELBv2 clients of one region, with the ledger of every request."""

    def __init__(self, config: AWSCloudConfig, session: Any = None) -> None:
        _quiet_botocore()
        self.region = config.region
        session = session if session is not None else boto3.session.Session()
        retries = {"mode": "standard", "total_max_attempts": config.global_.api_max_attempts}
        client_config = botocore.config.Config(retries=retries)
        self._clients = {
            name: self._client(session, config, name, client_config) for name in CLIENTS
        }
        self.ec2 = self._clients["ec2"]
        self.elb = self._clients["elb"]
        self.elbv2 = self._clients["elbv2"]
        self.ledger = CloudAPICalls()

    @staticmethod
    def _client(
        session: Any, config: AWSCloudConfig, name: str, client_config: botocore.config.Config
    ) -> Any:
        override = config.endpoint(name) or (config.endpoint("elbv2") if name == "elb" else None)
        kwargs: dict[str, Any] = {"region_name": config.region, "config": client_config}
        if override is not None:
            kwargs["endpoint_url"] = override.url
            if override.signing_region:
                kwargs["region_name"] = override.signing_region
        return session.client(name, **kwargs)

    def call(self, service: str, operation: str, **params: Any) -> dict[str, Any]:
        """Call ``operation`` (boto3's snake_case name) of ``ec2``, ``elb`` or ``elbv2``."""
        client = self._clients[service]
        self.ledger.record(f"{service}:{operation}", mutating=classify_by_verb(operation))
        try:
            result: dict[str, Any] = getattr(client, operation)(**params)
        except botocore.exceptions.ClientError as err:
            raise _mapped(service, operation, err) from err
        except botocore.exceptions.BotoCoreError as err:
            raise AWSAPIError(f"{service} {operation}: {err}") from err
        except botocore.parsers.ResponseParserError as err:
            raise AWSAPIError(f"{service} {operation}: {_unparsed(err)}") from err
        return result

    def pages(self, service: str, operation: str, key: str, **params: Any) -> Iterator[Any]:
        """Every item under ``key`` across the pages of a paginated ``operation``."""
        token_in, token_out = (
            ("NextToken", "NextToken") if service == "ec2" else ("Marker", "NextMarker")
        )
        while True:
            page = self.call(service, operation, **params)
            yield from page.get(key, ())
            token = page.get(token_out)
            if not token:
                return
            params = {**params, token_in: token}

    def counts(self) -> Mapping[str, int]:
        """Calls made so far per ``service:operation`` (retries by botocore not included)."""
        snap = self.ledger.snapshot()
        return {**snap.reads, **snap.writes}


def _unparsed(err: botocore.parsers.ResponseParserError) -> str:
    """The parser's complaint without the body it quotes (a whole HTML page)."""
    first = str(err).split("\n", 1)[0].removesuffix(" Further retries may succeed:")
    return f"the endpoint's answer is not an AWS answer: {first}"


def _mapped(service: str, operation: str, err: botocore.exceptions.ClientError) -> Exception:
    code = error_code(err)
    message = str(err.response.get("Error", {}).get("Message", "")) or str(err)
    text = f"{service} {operation}: {code}: {message}"
    if code in THROTTLING_CODES:
        return Throttled(f"AWS rate limit: {text}")
    if is_quota_code(code):
        return AWSQuotaExceeded(f"AWS quota or limit exceeded: {text}", code)
    if code in PERMISSION_CODES:
        return AWSPermissionDenied(f"AWS permission denied: {text}", code)
    return AWSAPIError(text, code)
