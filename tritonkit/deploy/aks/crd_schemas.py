"""JSON Schemas for every custom resource (and Azure resource) tritonkit renders, and the check that
runs them: a kind without a schema is an error, never a silent pass.

Written by hand from each project's published API reference, for the fields tritonkit emits plus
their documented siblings; every object level is closed (``additionalProperties: false``) so a
misspelt field fails:

- prometheus-operator API reference (monitoring.coreos.com/v1): ServiceMonitorSpec, Endpoint,
  PodMonitorSpec, PodMetricsEndpoint, PrometheusRuleSpec, RuleGroup, Rule, Duration.
- Azure Monitor managed Prometheus ("Customize collection using CRDs"): the same ServiceMonitor
  and PodMonitor in azmonitoring.coreos.com/v1 (no PrometheusRule in that group: Azure keeps rule
  groups as Microsoft.AlertsManagement/prometheusRuleGroups resources).
- KEDA reference (keda.sh/v1alpha1): ScaledObject specification, the prometheus scaler's trigger
  metadata (a string map), TriggerAuthentication's podIdentity providers.
- Azure resource reference: Microsoft.AlertsManagement/prometheusRuleGroups@2023-03-01.

Built-in kinds are checked with kubernetes-validate (Kubernetes' own OpenAPI schemas, strict).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from tritonkit._extras import require
from tritonkit.errors import DeployValidationError

_DURATION = r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
_DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}


def _obj(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": properties}
    if required:
        schema["required"] = list(required)
    return schema


_METADATA = _obj(
    {
        "name": {"type": "string", "maxLength": 253, "pattern": _DNS1123_SUBDOMAIN},
        "namespace": {"type": "string", "maxLength": 63, "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
        "labels": _STR_MAP,
        "annotations": _STR_MAP,
    },
    required=["name", "namespace"],
)
_LABEL_SELECTOR = _obj(
    {
        "matchLabels": _STR_MAP,
        "matchExpressions": {
            "type": "array",
            "items": _obj(
                {
                    "key": {"type": "string"},
                    "operator": {"enum": ["In", "NotIn", "Exists", "DoesNotExist"]},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
                required=["key", "operator"],
            ),
        },
    }
)
_NAMESPACE_SELECTOR = _obj(
    {"any": {"type": "boolean"}, "matchNames": {"type": "array", "items": {"type": "string"}}}
)
_INT_OR_STRING = {"anyOf": [{"type": "integer"}, {"type": "string"}]}
_RELABELINGS = {"type": "array", "items": {"type": "object"}}
_SCRAPE_COMMON: dict[str, Any] = {
    "path": {"type": "string"},
    "scheme": {"enum": ["http", "https"]},
    "params": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
    "interval": {"type": "string", "pattern": _DURATION},
    "scrapeTimeout": {"type": "string", "pattern": _DURATION},
    "honorLabels": {"type": "boolean"},
    "honorTimestamps": {"type": "boolean"},
    "relabelings": _RELABELINGS,
    "metricRelabelings": _RELABELINGS,
    "followRedirects": {"type": "boolean"},
    "enableHttp2": {"type": "boolean"},
    "filterRunning": {"type": "boolean"},
}
_LIMITS: dict[str, Any] = {
    "sampleLimit": {"type": "integer", "minimum": 0},
    "targetLimit": {"type": "integer", "minimum": 0},
    "labelLimit": {"type": "integer", "minimum": 0},
    "labelNameLengthLimit": {"type": "integer", "minimum": 0},
    "labelValueLengthLimit": {"type": "integer", "minimum": 0},
}

SERVICE_MONITOR_SPEC = _obj(
    {
        "jobLabel": {"type": "string"},
        "targetLabels": {"type": "array", "items": {"type": "string"}},
        "podTargetLabels": {"type": "array", "items": {"type": "string"}},
        "selector": _LABEL_SELECTOR,
        "namespaceSelector": _NAMESPACE_SELECTOR,
        "endpoints": {
            "type": "array",
            "items": _obj({"port": {"type": "string"}, "targetPort": _INT_OR_STRING, **_SCRAPE_COMMON}),
        },
        **_LIMITS,
    },
    required=["selector"],
)
POD_MONITOR_SPEC = _obj(
    {
        "jobLabel": {"type": "string"},
        "podTargetLabels": {"type": "array", "items": {"type": "string"}},
        "selector": _LABEL_SELECTOR,
        "namespaceSelector": _NAMESPACE_SELECTOR,
        "podMetricsEndpoints": {
            "type": "array",
            "items": _obj(
                {
                    "port": {"type": "string"},
                    "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "targetPort": _INT_OR_STRING,
                    **_SCRAPE_COMMON,
                }
            ),
        },
        **_LIMITS,
    },
    required=["selector"],
)
PROMETHEUS_RULE_SPEC = _obj(
    {
        "groups": {
            "type": "array",
            "items": _obj(
                {
                    "name": {"type": "string", "minLength": 1},
                    "interval": {"type": "string", "pattern": _DURATION},
                    "query_offset": {"type": "string", "pattern": _DURATION},
                    "limit": {"type": "integer"},
                    "partial_response_strategy": {"type": "string"},
                    "labels": _STR_MAP,
                    "rules": {
                        "type": "array",
                        "items": {
                            **_obj(
                                {
                                    "record": {"type": "string"},
                                    "alert": {"type": "string"},
                                    "expr": _INT_OR_STRING,
                                    "for": {"type": "string", "pattern": _DURATION},
                                    "keep_firing_for": {"type": "string", "pattern": _DURATION},
                                    "labels": _STR_MAP,
                                    "annotations": _STR_MAP,
                                },
                                required=["expr"],
                            ),
                            # A rule records or alerts, never both.
                            "oneOf": [{"required": ["record"]}, {"required": ["alert"]}],
                        },
                    },
                },
                required=["name"],
            ),
        }
    }
)

_HPA_POLICY = _obj(
    {
        "type": {"enum": ["Pods", "Percent"]},
        "value": {"type": "integer", "minimum": 1},
        "periodSeconds": {"type": "integer", "minimum": 1, "maximum": 1800},
    },
    required=["type", "value", "periodSeconds"],
)
_HPA_RULES = _obj(
    {
        "stabilizationWindowSeconds": {"type": "integer", "minimum": 0, "maximum": 3600},
        "selectPolicy": {"enum": ["Max", "Min", "Disabled"]},
        "policies": {"type": "array", "items": _HPA_POLICY},
        "tolerance": _INT_OR_STRING,
    }
)
SCALED_OBJECT_SPEC = _obj(
    {
        "scaleTargetRef": _obj(
            {
                "apiVersion": {"type": "string"},
                "kind": {"type": "string"},
                "name": {"type": "string", "minLength": 1},
                "envSourceContainerName": {"type": "string"},
            },
            required=["name"],
        ),
        "pollingInterval": {"type": "integer", "minimum": 1},
        "initialCooldownPeriod": {"type": "integer", "minimum": 0},
        "cooldownPeriod": {"type": "integer", "minimum": 0},
        "idleReplicaCount": {"type": "integer", "minimum": 0},
        "minReplicaCount": {"type": "integer", "minimum": 0},
        "maxReplicaCount": {"type": "integer", "minimum": 1},
        "fallback": _obj(
            {"failureThreshold": {"type": "integer"}, "replicas": {"type": "integer"}},
            required=["failureThreshold", "replicas"],
        ),
        "advanced": _obj(
            {
                "restoreToOriginalReplicaCount": {"type": "boolean"},
                "horizontalPodAutoscalerConfig": _obj(
                    {
                        "name": {"type": "string"},
                        "behavior": _obj({"scaleUp": _HPA_RULES, "scaleDown": _HPA_RULES}),
                    }
                ),
                "scalingModifiers": {"type": "object"},
            }
        ),
        "triggers": {
            "type": "array",
            "minItems": 1,
            "items": _obj(
                {
                    "type": {"type": "string", "minLength": 1},
                    "name": {"type": "string"},
                    "useCachedMetrics": {"type": "boolean"},
                    "metricType": {"enum": ["AverageValue", "Value", "Utilization"]},
                    # The scaler's metadata is a map of strings (numbers quoted).
                    "metadata": _STR_MAP,
                    "authenticationRef": _obj(
                        {
                            "name": {"type": "string", "minLength": 1},
                            "kind": {"enum": ["TriggerAuthentication", "ClusterTriggerAuthentication"]},
                        },
                        required=["name"],
                    ),
                },
                required=["type", "metadata"],
            ),
        },
    },
    required=["scaleTargetRef", "triggers"],
)
TRIGGER_AUTHENTICATION_SPEC = _obj(
    {
        "podIdentity": _obj(
            {
                "provider": {"enum": ["none", "azure-workload", "aws", "aws-eks", "gcp"]},
                "identityId": {"type": "string"},
                "identityTenantId": {"type": "string"},
                "identityAuthorityHost": {"type": "string"},
                "roleArn": {"type": "string"},
                "identityOwner": {"enum": ["keda", "workload"]},
            },
            required=["provider"],
        ),
        "secretTargetRef": {
            "type": "array",
            "items": _obj(
                {"parameter": {"type": "string"}, "name": {"type": "string"}, "key": {"type": "string"}},
                required=["parameter", "name", "key"],
            ),
        },
        "env": {"type": "array", "items": {"type": "object"}},
    }
)

# The prometheus scaler's metadata keys (KEDA's prometheus scaler page).
PROMETHEUS_TRIGGER_METADATA = _obj(
    {
        key: {"type": "string"}
        for key in (
            "serverAddress",
            "query",
            "queryParameters",
            "threshold",
            "activationThreshold",
            "namespace",
            "customHeaders",
            "ignoreNullValues",
            "unsafeSsl",
            "timeout",
            "authModes",
        )
    },
    required=["serverAddress", "query", "threshold"],
)


def _resource(api_version: str, kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    return _obj(
        {"apiVersion": {"const": api_version}, "kind": {"const": kind}, "metadata": _METADATA, "spec": spec},
        required=["apiVersion", "kind", "metadata", "spec"],
    )


#: (apiVersion, kind) -> schema of the whole object.
CUSTOM_RESOURCES: dict[tuple[str, str], dict[str, Any]] = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): _resource(
        "monitoring.coreos.com/v1", "ServiceMonitor", SERVICE_MONITOR_SPEC
    ),
    ("monitoring.coreos.com/v1", "PodMonitor"): _resource(
        "monitoring.coreos.com/v1", "PodMonitor", POD_MONITOR_SPEC
    ),
    ("monitoring.coreos.com/v1", "PrometheusRule"): _resource(
        "monitoring.coreos.com/v1", "PrometheusRule", PROMETHEUS_RULE_SPEC
    ),
    ("azmonitoring.coreos.com/v1", "ServiceMonitor"): _resource(
        "azmonitoring.coreos.com/v1", "ServiceMonitor", SERVICE_MONITOR_SPEC
    ),
    ("azmonitoring.coreos.com/v1", "PodMonitor"): _resource(
        "azmonitoring.coreos.com/v1", "PodMonitor", POD_MONITOR_SPEC
    ),
    ("keda.sh/v1alpha1", "ScaledObject"): _resource("keda.sh/v1alpha1", "ScaledObject", SCALED_OBJECT_SPEC),
    ("keda.sh/v1alpha1", "TriggerAuthentication"): _resource(
        "keda.sh/v1alpha1", "TriggerAuthentication", TRIGGER_AUTHENTICATION_SPEC
    ),
}

_ARM_EXPRESSION = {"type": "string", "pattern": r"^\[.*\]$"}
_RULE_GROUP_RULE = _obj(
    {
        "record": {"type": "string"},
        "alert": {"type": "string"},
        "expression": {"type": "string", "minLength": 1},
        "enabled": {"type": "boolean"},
        "for": {"type": "string", "pattern": r"^P(T(\d+H)?(\d+M)?(\d+S)?)$"},
        "severity": {"type": "integer", "minimum": 0, "maximum": 4},
        "labels": _STR_MAP,
        "annotations": _STR_MAP,
        "resolveConfiguration": _obj(
            {"autoResolved": {"type": "boolean"}, "timeToResolve": {"type": "string", "pattern": r"^PT"}}
        ),
        "actions": {
            "anyOf": [
                {
                    "type": "array",
                    "items": _obj(
                        {"actionGroupId": {"type": "string"}, "actionProperties": _STR_MAP},
                        required=["actionGroupId"],
                    ),
                },
                _ARM_EXPRESSION,
            ]
        },
    },
    required=["expression"],
)
#: An ARM deployment template holding prometheusRuleGroups resources only.
RULE_GROUPS_TEMPLATE = _obj(
    {
        "$schema": {"type": "string"},
        "contentVersion": {"type": "string"},
        "parameters": {"type": "object"},
        "resources": {
            "type": "array",
            "minItems": 1,
            "items": _obj(
                {
                    "type": {"const": "Microsoft.AlertsManagement/prometheusRuleGroups"},
                    "apiVersion": {"enum": ["2023-03-01", "2021-07-22-preview"]},
                    "name": {"type": "string", "pattern": r"^[^:@/#{}%&+*<>?\\]+$"},
                    "location": {"type": "string"},
                    "tags": _STR_MAP,
                    "properties": _obj(
                        {
                            "description": {"type": "string"},
                            "scopes": {"type": "array", "minItems": 1, "items": {"type": "string"}},
                            "clusterName": {"type": "string"},
                            "enabled": {"type": "boolean"},
                            "interval": {"type": "string", "pattern": r"^PT"},
                            "rules": {"type": "array", "items": _RULE_GROUP_RULE},
                        },
                        required=["scopes", "rules"],
                    ),
                },
                required=["type", "apiVersion", "name", "location", "properties"],
            ),
        },
    },
    required=["$schema", "contentVersion", "resources"],
)

_BUILTIN_GROUPS = {"", "apps", "policy", "networking.k8s.io", "autoscaling"}


def _path(error: Any) -> str:
    return "/".join(str(p) for p in error.absolute_path) or "(top)"


def custom_resource_problems(doc: Mapping[str, Any]) -> list[str]:
    """Problems of one custom resource against our schema; a kind without a schema is one too."""
    jsonschema = require("jsonschema", feature="checking the AKS custom resources")
    key = (str(doc.get("apiVersion")), str(doc.get("kind")))
    schema = CUSTOM_RESOURCES.get(key)
    name = f"{key[1]} {doc.get('metadata', {}).get('name', '?')} ({key[0]})"
    if schema is None:
        return [f"{name}: no schema for this kind, so it cannot be checked: tritonkit must not emit it"]
    validator = jsonschema.Draft202012Validator(schema)
    problems = [f"{name}: {_path(e)}: {e.message}" for e in validator.iter_errors(dict(doc))]
    if key[1] == "ScaledObject" and not problems:
        for i, trigger in enumerate(doc["spec"]["triggers"]):
            if trigger["type"] == "prometheus":
                meta_validator = jsonschema.Draft202012Validator(PROMETHEUS_TRIGGER_METADATA)
                problems += [
                    f"{name}: spec/triggers/{i}/metadata/{_path(e)}: {e.message}"
                    for e in meta_validator.iter_errors(trigger["metadata"])
                ]
    return problems


def builtin_problems(doc: Mapping[str, Any], version: str | None = None) -> list[str]:
    """Problems of a built-in kind against Kubernetes' OpenAPI schema (strict: unknown fields fail)."""
    kv = require("kubernetes_validate", feature="checking the AKS manifests")
    from kubernetes_validate.utils import latest_version

    try:
        kv.validate(dict(doc), version or latest_version(), strict=True)
    except kv.ValidationError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top)"
        return [f"{doc.get('kind')} {doc.get('metadata', {}).get('name', '?')}: {where}: {exc.message}"]
    except kv.SchemaNotFoundError as exc:
        return [f"{doc.get('kind')} ({doc.get('apiVersion')}): Kubernetes has no schema for it: {exc}"]
    return []


def is_builtin(doc: Mapping[str, Any]) -> bool:
    return str(doc.get("apiVersion", "")).rpartition("/")[0] in _BUILTIN_GROUPS


def object_problems(docs: Iterable[Mapping[str, Any]], *, version: str | None = None) -> list[str]:
    """Every object against its schema: built-ins through kubernetes-validate, the rest ours."""
    problems: list[str] = []
    for doc in docs:
        problems += builtin_problems(doc, version) if is_builtin(doc) else custom_resource_problems(doc)
    return problems


def rule_groups_problems(template: Mapping[str, Any]) -> list[str]:
    jsonschema = require("jsonschema", feature="checking the Azure rule-group template")
    validator = jsonschema.Draft202012Validator(RULE_GROUPS_TEMPLATE)
    return [
        f"prometheusRuleGroups template: {_path(e)}: {e.message}"
        for e in validator.iter_errors(dict(template))
    ]


def check_objects(docs: Iterable[Mapping[str, Any]], *, version: str | None = None) -> None:
    """Raise DeployValidationError listing every schema problem (a bug in tritonkit's renderer, or a
    field a user-supplied value broke)."""
    problems = object_problems(docs, version=version)
    if problems:
        listing = "\n".join(f"  - {p}" for p in problems)
        raise DeployValidationError(
            f"the rendered AKS objects do not match their schemas; nothing was written or applied:"
            f"\n{listing}",
            problems=problems,
        )
