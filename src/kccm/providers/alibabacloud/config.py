"""The alibabacloud provider's cloud config: upstream's file, read unchanged.

Upstream kubernetes/cloud-provider-alibaba-cloud v2.14.0 reads ``--cloud-config`` with
``sigs.k8s.io/yaml`` into ``CloudConfig`` (``pkg/config/cloud_config.go``): one section
``Global`` with the keys of :data:`FIELDS`. YAML or JSON (JSON is YAML). As Go decodes it:

- keys match exactly, else case-insensitively (``encoding/json``); a key that names no field is
  ignored (kccm logs it); when two keys match one field the last wins;
- ``null`` leaves the default;
- a number or boolean given for a string key is taken as its text (``vpcid: 123`` ->
  ``"123"``, ``sigs.k8s.io/yaml``'s conversion); any other type mismatch (``"3"`` or ``true``
  for an integer, ``"true"`` for a boolean) is an error naming the key: one line, kccm exits 2.

Defaults as ``SetDefaultValue``: ``serviceMaxConcurrentReconciles`` 3,
``nodeMaxConcurrentReconciles`` 1, ``routeMaxConcurrentReconciles`` 1 (each when 0);
``resourceGroupID`` and ``routeTableIDs`` trimmed; ``kubernetesClusterTag`` ``ack.aliyun.com``
when empty (``GetKubernetesClusterTag``, ``util.ClusterTagKey``).

``featureGates`` (``k=v,...``) is checked as ``BindFeatureGates`` (``pkg/config/feature_gates.go``)
checks it: a pair without ``=`` or a value ``strconv.ParseBool`` refuses is an error; of the
gates only ``IPv6DualStack`` changes what kccm does (the primary ENI's IPv6 addresses become
InternalIP addresses, ``findAddress`` in ``pkg/provider/alibaba/ecs/ecs.go``).

``accessKeyID`` and ``accessKeySecret`` are base64 in the file (``LoadAK`` in
``pkg/provider/alibaba/base/token.go`` decodes them); they never appear in a repr or a log.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

from kccm.cloudprovider import CloudConfigError

__all__ = [
    "DEFAULT_CLUSTER_TAG",
    "FEATURE_GATES",
    "FIELDS",
    "AlibabaConfig",
    "go_parse_bool",
    "load_alibaba_config",
]

log = logging.getLogger(__name__)

DEFAULT_CLUSTER_TAG = "ack.aliyun.com"
"""``util.ClusterTagKey`` (``pkg/util/constant.go``)."""

FEATURE_GATES = {
    "IPv6DualStack": False,
    "EndpointSlice": True,
    "FilterServiceOnNodeChange": False,
    "LoadBalancerTypeAnnotation": False,
}
"""``CloudProviderFeatureGates`` and their defaults."""

_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")
_INT64 = (-(2**63), 2**63 - 1)


def go_parse_bool(text: str) -> bool | None:
    """``strconv.ParseBool``; ``None`` for what it refuses."""
    if text in _GO_TRUE:
        return True
    if text in _GO_FALSE:
        return False
    return None


@dataclass(frozen=True)
class AlibabaConfig:
    """``CloudConfig.Global`` after ``SetDefaultValue`` (attribute names in snake case)."""

    uid: str = ""
    access_key_id: str = field(default="", repr=False)
    access_key_secret: str = field(default="", repr=False)
    cluster_id: str = ""
    kubernetes_cluster_tag: str = ""
    region: str = ""
    vpc_id: str = ""
    zone_id: str = ""
    vswitch_id: str = ""
    resource_group_id: str = ""
    service_max_concurrent_reconciles: int = 0
    service_backend_type: str = ""
    disable_public_slb: bool = False
    node_max_concurrent_reconciles: int = 0
    node_monitor_period: int = 0
    node_addr_sync_period: int = 0
    route_max_concurrent_reconciles: int = 0
    route_table_ids: str = ""
    private_zone_id: str = ""
    private_zone_record_ttl: int = 0
    feature_gates: str = ""
    gates: Mapping[str, bool] = field(default_factory=lambda: dict(FEATURE_GATES))

    @property
    def cluster_tag(self) -> str:
        """``GetKubernetesClusterTag``."""
        return self.kubernetes_cluster_tag or DEFAULT_CLUSTER_TAG

    @property
    def route_tables(self) -> list[str]:
        """``routeTableIDs`` split at commas (upstream does not trim the parts)."""
        return self.route_table_ids.split(",") if self.route_table_ids else []

    @property
    def reads_metadata_from_config(self) -> bool:
        """``NewMetaData``: with ``vpcid`` and ``vswitchid`` set, region, VPC and zone come
        from the config (``CfgMetaData``), else from the metadata service."""
        return bool(self.vpc_id and self.vswitch_id)

    def access_key_pair(self) -> tuple[str, str]:
        """The decoded AccessKey pair of the file (``("", "")`` without one)."""
        if not (self.access_key_id and self.access_key_secret):
            return "", ""
        return _b64(self.access_key_id, "accessKeyID"), _b64(
            self.access_key_secret, "accessKeySecret"
        )


FIELDS: dict[str, tuple[str, type]] = {
    "uid": ("uid", str),
    "accessKeyID": ("access_key_id", str),
    "accessKeySecret": ("access_key_secret", str),
    "clusterID": ("cluster_id", str),
    "kubernetesClusterTag": ("kubernetes_cluster_tag", str),
    "region": ("region", str),
    "vpcid": ("vpc_id", str),
    "zoneid": ("zone_id", str),
    "vswitchid": ("vswitch_id", str),
    "resourceGroupID": ("resource_group_id", str),
    "serviceMaxConcurrentReconciles": ("service_max_concurrent_reconciles", int),
    "serviceBackendType": ("service_backend_type", str),
    "disablePublicSLB": ("disable_public_slb", bool),
    "nodeMaxConcurrentReconciles": ("node_max_concurrent_reconciles", int),
    "nodeMonitorPeriod": ("node_monitor_period", int),
    "nodeAddrSyncPeriod": ("node_addr_sync_period", int),
    "routeMaxConcurrentReconciles": ("route_max_concurrent_reconciles", int),
    "routeTableIDs": ("route_table_ids", str),
    "privateZoneId": ("private_zone_id", str),
    "privateZoneRecordTTL": ("private_zone_record_ttl", int),
    "featureGates": ("feature_gates", str),
}
"""Every key of ``CloudConfig.Global``: its attribute and Go type."""

_SECRET_KEYS = frozenset({"accessKeyID", "accessKeySecret"})


def _b64(value: str, key: str) -> str:
    try:
        return base64.b64decode(value, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as err:
        raise CloudConfigError([f'cloud config: "Global.{key}": not base64 text']) from err


def _match(key: str, names: Any) -> str | None:
    """``encoding/json``'s field match: exact, else case-insensitive."""
    if key in names:
        return str(key)
    folded = key.casefold()
    return next((str(n) for n in names if str(n).casefold() == folded), None)


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _decode_value(source: str, key: str, kind: type, value: Any) -> Any:
    shown = "<hidden>" if key in _SECRET_KEYS else repr(value)
    where = f'{source}: "Global.{key}"'
    if kind is str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float | str):
            return str(value)
        raise CloudConfigError([f"{where}: cannot take a {_json_type(value)} for a string"])
    if kind is bool:
        if isinstance(value, bool):
            return value
        raise CloudConfigError([f"{where}: {shown} is not a boolean (true or false)"])
    integral = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not integral:
        raise CloudConfigError([f"{where}: {shown} is not an integer"])
    number = int(value)
    if not _INT64[0] <= number <= _INT64[1]:
        raise CloudConfigError([f"{where}: {number} overflows a Go int64"])
    return number


def _parse_document(text: str, source: str) -> Any:
    try:
        return yaml.safe_load(text) if text.strip() else {}
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None) or "not YAML or JSON"
        raise CloudConfigError([f"{source}{line}: {problem}"]) from err


def _feature_gates(text: str, source: str) -> dict[str, bool]:
    gates = dict(FEATURE_GATES)
    for item in text.split(","):
        if not item:
            continue
        name, sep, raw = item.partition("=")
        name = name.strip()
        where = f'{source}: "Global.featureGates"'
        if not sep:
            raise CloudConfigError([f"{where}: missing bool value for {name}"])
        value = go_parse_bool(raw.strip())
        if value is None:
            raise CloudConfigError([f"{where}: invalid value of {name}={raw.strip()}"])
        if name not in FEATURE_GATES:
            log.warning("alibabacloud: feature gate %s is not one kccm knows; ignored", name)
        gates[name] = value
    return gates


def load_alibaba_config(text: str, source: str = "cloud-config") -> AlibabaConfig:
    """Decode upstream's cloud config (see the module doc); :class:`CloudConfigError` names
    the key of the first problem."""
    document = _parse_document(text, source)
    if not isinstance(document, Mapping):
        raise CloudConfigError([f"{source}: the document must be a mapping with Global"])
    values: dict[str, Any] = {}
    for top, body in document.items():
        if _match(str(top), ("Global",)) is None:
            log.info("alibabacloud: %s: key %r ignored (not upstream's)", source, top)
            continue
        if body is None:
            continue
        if not isinstance(body, Mapping):
            raise CloudConfigError([f'{source}: "Global": expected a mapping of keys'])
        for key, value in body.items():
            name = _match(str(key), FIELDS)
            if name is None:
                log.info("alibabacloud: %s: key Global.%s ignored (not upstream's)", source, key)
                continue
            if value is None:
                continue
            attr, kind = FIELDS[name]
            values[attr] = _decode_value(source, name, kind, value)
    return _with_defaults(values, source)


def _with_defaults(values: dict[str, Any], source: str) -> AlibabaConfig:
    for attr, default in (
        ("service_max_concurrent_reconciles", 3),
        ("node_max_concurrent_reconciles", 1),
        ("route_max_concurrent_reconciles", 1),
    ):
        if not values.get(attr):
            values[attr] = default
    for attr in ("resource_group_id", "route_table_ids"):
        values[attr] = str(values.get(attr, "")).strip()
    values["gates"] = _feature_gates(str(values.get("feature_gates", "")), source)
    config = AlibabaConfig(**values)
    config.access_key_pair()  # a pair that is not base64 stops the start here
    return config


def config_summary(config: AlibabaConfig) -> str:
    """The config as one log line, without the AccessKey pair."""
    shown = {
        f.name: getattr(config, f.name)
        for f in dataclasses.fields(config)
        if f.repr and f.name != "gates" and getattr(config, f.name)
    }
    return json.dumps(shown, sort_keys=True)
