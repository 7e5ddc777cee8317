//! The protobuf shapes of the built-in kinds the emulator accepts as protobuf request bodies
//! (what `kubectl create <kind>` sends from kubectl 1.32 on), as field tables: tag → JSON name and
//! type. Tags are those of `k8s.io/api` (`generated.proto`); the tests cross-check them against
//! the `k8s-pb` bindings. A field outside these tables makes the decoder refuse the body rather
//! than store the object without it.

/// How a field's value is read and written to JSON.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// `string`.
    Str,
    /// `int32`/`int64`.
    Int,
    /// `bool`.
    Bool,
    /// A nested message.
    Msg(&'static Message),
    /// A nested message whose fields are inlined in the parent's JSON (Go embedding).
    Inline(&'static Message),
    /// `meta.v1.Time`: RFC 3339 seconds, `null` when zero.
    Time,
    /// `util.intstr.IntOrString`.
    IntOrString,
    /// `map<string, string>`.
    MapStr,
    /// `map<string, bytes>` (base64 values).
    MapBytes,
    /// `map<string, Quantity>`.
    MapQuantity,
}

/// One field of a message.
#[derive(Debug)]
pub struct Field {
    /// Protobuf field number.
    pub tag: u64,
    /// JSON field name.
    pub json: &'static str,
    /// Type.
    pub ty: Ty,
    /// `repeated`.
    pub repeated: bool,
    /// A pointer field in Go (`*int32`, `*bool`, `*string`): present means set, so a zero value
    /// is kept. Other scalar fields are `omitempty`: their zero value is left out, as Go's JSON
    /// encoding does.
    pub optional: bool,
}

/// A message: its name (for diagnostics) and fields.
#[derive(Debug)]
pub struct Message {
    /// Go type name.
    pub name: &'static str,
    /// Fields.
    pub fields: &'static [Field],
}

const fn f(tag: u64, json: &'static str, ty: Ty) -> Field {
    Field {
        tag,
        json,
        ty,
        repeated: false,
        optional: false,
    }
}

const fn opt(tag: u64, json: &'static str, ty: Ty) -> Field {
    Field {
        tag,
        json,
        ty,
        repeated: false,
        optional: true,
    }
}

const fn rep(tag: u64, json: &'static str, ty: Ty) -> Field {
    Field {
        tag,
        json,
        ty,
        repeated: true,
        optional: false,
    }
}

use Ty::{Bool, Inline, Int, IntOrString, MapBytes, MapQuantity, MapStr, Msg, Str, Time};

/// `meta.v1.OwnerReference`.
pub static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        f(5, "apiVersion", Str),
        f(1, "kind", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
        opt(6, "controller", Bool),
        opt(7, "blockOwnerDeletion", Bool),
    ],
};

/// `meta.v1.ObjectMeta` (without `managedFields`, which clients do not send on create).
pub static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        f(1, "name", Str),
        f(2, "generateName", Str),
        f(3, "namespace", Str),
        f(4, "selfLink", Str),
        f(5, "uid", Str),
        f(6, "resourceVersion", Str),
        f(7, "generation", Int),
        f(8, "creationTimestamp", Time),
        opt(9, "deletionTimestamp", Time),
        opt(10, "deletionGracePeriodSeconds", Int),
        f(11, "labels", MapStr),
        f(12, "annotations", MapStr),
        rep(13, "ownerReferences", Msg(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
    ],
};

/// `meta.v1.LabelSelectorRequirement`.
pub static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        f(1, "key", Str),
        f(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

/// `meta.v1.LabelSelector`.
pub static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        f(1, "matchLabels", MapStr),
        rep(2, "matchExpressions", Msg(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

/// `core.v1.NamespaceSpec`.
pub static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};

/// `core.v1.NamespaceStatus` (without conditions).
pub static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[f(1, "phase", Str)],
};

/// `core.v1.Namespace`.
pub static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&NAMESPACE_SPEC)),
        f(3, "status", Msg(&NAMESPACE_STATUS)),
    ],
};

/// `core.v1.Secret`.
pub static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        opt(5, "immutable", Bool),
        f(2, "data", MapBytes),
        f(4, "stringData", MapStr),
        f(3, "type", Str),
    ],
};

/// `core.v1.ConfigMap`.
pub static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        opt(4, "immutable", Bool),
        f(2, "data", MapStr),
        f(3, "binaryData", MapBytes),
    ],
};

/// `core.v1.ObjectReference`.
pub static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        f(1, "kind", Str),
        f(2, "namespace", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
        f(5, "apiVersion", Str),
        f(6, "resourceVersion", Str),
        f(7, "fieldPath", Str),
    ],
};

/// `core.v1.LocalObjectReference`.
pub static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[f(1, "name", Str)],
};

/// `core.v1.ServiceAccount`.
pub static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "secrets", Msg(&OBJECT_REFERENCE)),
        rep(3, "imagePullSecrets", Msg(&LOCAL_OBJECT_REFERENCE)),
        opt(4, "automountServiceAccountToken", Bool),
    ],
};

/// `rbac.v1.PolicyRule`.
pub static POLICY_RULE: Message = Message {
    name: "PolicyRule",
    fields: &[
        rep(1, "verbs", Str),
        rep(2, "apiGroups", Str),
        rep(3, "resources", Str),
        rep(4, "resourceNames", Str),
        rep(5, "nonResourceURLs", Str),
    ],
};

/// `rbac.v1.AggregationRule`.
pub static AGGREGATION_RULE: Message = Message {
    name: "AggregationRule",
    fields: &[rep(1, "clusterRoleSelectors", Msg(&LABEL_SELECTOR))],
};

/// `rbac.v1.Role`.
pub static ROLE: Message = Message {
    name: "Role",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "rules", Msg(&POLICY_RULE)),
    ],
};

/// `rbac.v1.ClusterRole`.
pub static CLUSTER_ROLE: Message = Message {
    name: "ClusterRole",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "rules", Msg(&POLICY_RULE)),
        opt(3, "aggregationRule", Msg(&AGGREGATION_RULE)),
    ],
};

/// `rbac.v1.Subject`.
pub static SUBJECT: Message = Message {
    name: "Subject",
    fields: &[
        f(1, "kind", Str),
        f(2, "apiGroup", Str),
        f(3, "name", Str),
        f(4, "namespace", Str),
    ],
};

/// `rbac.v1.RoleRef`.
pub static ROLE_REF: Message = Message {
    name: "RoleRef",
    fields: &[f(1, "apiGroup", Str), f(2, "kind", Str), f(3, "name", Str)],
};

/// `rbac.v1.RoleBinding` and `ClusterRoleBinding` (same shape).
pub static ROLE_BINDING: Message = Message {
    name: "RoleBinding",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        rep(2, "subjects", Msg(&SUBJECT)),
        f(3, "roleRef", Msg(&ROLE_REF)),
    ],
};

/// `core.v1.ContainerPort`.
pub static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        f(1, "name", Str),
        f(2, "hostPort", Int),
        f(3, "containerPort", Int),
        f(4, "protocol", Str),
        f(5, "hostIP", Str),
    ],
};

/// `core.v1.ConfigMapKeySelector` / `SecretKeySelector` (same shape).
pub static KEY_SELECTOR: Message = Message {
    name: "KeySelector",
    fields: &[
        f(1, "", Inline(&LOCAL_OBJECT_REFERENCE)),
        f(2, "key", Str),
        opt(3, "optional", Bool),
    ],
};

/// `core.v1.EnvVarSource` (ConfigMap and Secret keys).
pub static ENV_VAR_SOURCE: Message = Message {
    name: "EnvVarSource",
    fields: &[
        opt(3, "configMapKeyRef", Msg(&KEY_SELECTOR)),
        opt(4, "secretKeyRef", Msg(&KEY_SELECTOR)),
    ],
};

/// `core.v1.EnvVar`.
pub static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        f(1, "name", Str),
        f(2, "value", Str),
        opt(3, "valueFrom", Msg(&ENV_VAR_SOURCE)),
    ],
};

/// `core.v1.ConfigMapEnvSource` / `SecretEnvSource` (same shape).
pub static ENV_SOURCE: Message = Message {
    name: "EnvSource",
    fields: &[
        f(1, "", Inline(&LOCAL_OBJECT_REFERENCE)),
        opt(2, "optional", Bool),
    ],
};

/// `core.v1.EnvFromSource`.
pub static ENV_FROM_SOURCE: Message = Message {
    name: "EnvFromSource",
    fields: &[
        f(1, "prefix", Str),
        opt(2, "configMapRef", Msg(&ENV_SOURCE)),
        opt(3, "secretRef", Msg(&ENV_SOURCE)),
    ],
};

/// `core.v1.ResourceRequirements` (without claims).
pub static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[f(1, "limits", MapQuantity), f(2, "requests", MapQuantity)],
};

/// `core.v1.VolumeMount`.
pub static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        f(1, "name", Str),
        f(2, "readOnly", Bool),
        opt(7, "recursiveReadOnly", Str),
        f(3, "mountPath", Str),
        f(4, "subPath", Str),
        opt(5, "mountPropagation", Str),
        f(6, "subPathExpr", Str),
    ],
};

/// `core.v1.Container` (without probes, lifecycle, security context and resize policies).
pub static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        f(1, "name", Str),
        f(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        f(5, "workingDir", Str),
        rep(6, "ports", Msg(&CONTAINER_PORT)),
        rep(19, "envFrom", Msg(&ENV_FROM_SOURCE)),
        rep(7, "env", Msg(&ENV_VAR)),
        f(8, "resources", Msg(&RESOURCE_REQUIREMENTS)),
        opt(24, "restartPolicy", Str),
        rep(9, "volumeMounts", Msg(&VOLUME_MOUNT)),
        f(13, "terminationMessagePath", Str),
        f(20, "terminationMessagePolicy", Str),
        f(14, "imagePullPolicy", Str),
        f(16, "stdin", Bool),
        f(17, "stdinOnce", Bool),
        f(18, "tty", Bool),
    ],
};

/// `core.v1.Toleration`.
pub static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        f(1, "key", Str),
        f(2, "operator", Str),
        f(3, "value", Str),
        f(4, "effect", Str),
        opt(5, "tolerationSeconds", Int),
    ],
};

/// `core.v1.PodSpec` (without volumes, affinity, security context and the rarer fields).
pub static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        rep(20, "initContainers", Msg(&CONTAINER)),
        rep(2, "containers", Msg(&CONTAINER)),
        f(3, "restartPolicy", Str),
        opt(4, "terminationGracePeriodSeconds", Int),
        opt(5, "activeDeadlineSeconds", Int),
        f(6, "dnsPolicy", Str),
        f(7, "nodeSelector", MapStr),
        f(8, "serviceAccountName", Str),
        f(9, "serviceAccount", Str),
        opt(21, "automountServiceAccountToken", Bool),
        f(10, "nodeName", Str),
        f(11, "hostNetwork", Bool),
        f(12, "hostPID", Bool),
        f(13, "hostIPC", Bool),
        opt(27, "shareProcessNamespace", Bool),
        rep(15, "imagePullSecrets", Msg(&LOCAL_OBJECT_REFERENCE)),
        f(16, "hostname", Str),
        f(17, "subdomain", Str),
        f(19, "schedulerName", Str),
        rep(22, "tolerations", Msg(&TOLERATION)),
        f(24, "priorityClassName", Str),
        opt(25, "priority", Int),
        opt(29, "runtimeClassName", Str),
        opt(30, "enableServiceLinks", Bool),
        opt(31, "preemptionPolicy", Str),
    ],
};

/// `core.v1.PodTemplateSpec`.
pub static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_SPEC)),
    ],
};

/// `apps.v1.RollingUpdateDeployment`.
pub static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        opt(1, "maxUnavailable", IntOrString),
        opt(2, "maxSurge", IntOrString),
    ],
};

/// `apps.v1.DeploymentStrategy`.
pub static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        f(1, "type", Str),
        opt(2, "rollingUpdate", Msg(&ROLLING_UPDATE_DEPLOYMENT)),
    ],
};

/// `apps.v1.DeploymentSpec`.
pub static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        opt(1, "replicas", Int),
        opt(2, "selector", Msg(&LABEL_SELECTOR)),
        f(3, "template", Msg(&POD_TEMPLATE_SPEC)),
        f(4, "strategy", Msg(&DEPLOYMENT_STRATEGY)),
        f(5, "minReadySeconds", Int),
        opt(6, "revisionHistoryLimit", Int),
        f(7, "paused", Bool),
        opt(9, "progressDeadlineSeconds", Int),
    ],
};

/// `apps.v1.DeploymentStatus` (without conditions): clients send it empty; the server owns it.
pub static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        f(1, "observedGeneration", Int),
        f(2, "replicas", Int),
        f(3, "updatedReplicas", Int),
        f(7, "readyReplicas", Int),
        f(4, "availableReplicas", Int),
        f(5, "unavailableReplicas", Int),
        opt(9, "terminatingReplicas", Int),
        opt(8, "collisionCount", Int),
    ],
};

/// `apps.v1.Deployment`.
pub static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&DEPLOYMENT_SPEC)),
        f(3, "status", Msg(&DEPLOYMENT_STATUS)),
    ],
};

/// `core.v1.ServicePort`.
pub static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        f(1, "name", Str),
        f(2, "protocol", Str),
        opt(6, "appProtocol", Str),
        f(3, "port", Int),
        f(4, "targetPort", IntOrString),
        f(5, "nodePort", Int),
    ],
};

/// `core.v1.ServiceSpec` (the fields a client sets on create).
pub static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", Msg(&SERVICE_PORT)),
        f(2, "selector", MapStr),
        f(3, "clusterIP", Str),
        rep(18, "clusterIPs", Str),
        f(4, "type", Str),
        rep(5, "externalIPs", Str),
        f(7, "sessionAffinity", Str),
        f(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        f(10, "externalName", Str),
        f(11, "externalTrafficPolicy", Str),
        f(12, "healthCheckNodePort", Int),
        f(13, "publishNotReadyAddresses", Bool),
        rep(19, "ipFamilies", Str),
        opt(17, "ipFamilyPolicy", Str),
        opt(20, "allocateLoadBalancerNodePorts", Bool),
        opt(21, "loadBalancerClass", Str),
        opt(22, "internalTrafficPolicy", Str),
        opt(23, "trafficDistribution", Str),
    ],
};

/// `core.v1.LoadBalancerIngress` (address fields only).
pub static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[f(1, "ip", Str), f(2, "hostname", Str)],
};

/// `core.v1.LoadBalancerStatus`.
pub static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[rep(1, "ingress", Msg(&LOAD_BALANCER_INGRESS))],
};

/// `core.v1.ServiceStatus` (without conditions).
pub static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[f(1, "loadBalancer", Msg(&LOAD_BALANCER_STATUS))],
};

/// `core.v1.Service` (what `kubectl create service` sends).
pub static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&SERVICE_SPEC)),
        f(3, "status", Msg(&SERVICE_STATUS)),
    ],
};

/// `batch.v1.JobSpec` (without the failure and success policies).
pub static JOB_SPEC: Message = Message {
    name: "JobSpec",
    fields: &[
        opt(1, "parallelism", Int),
        opt(2, "completions", Int),
        opt(3, "activeDeadlineSeconds", Int),
        opt(4, "selector", Msg(&LABEL_SELECTOR)),
        opt(5, "manualSelector", Bool),
        f(6, "template", Msg(&POD_TEMPLATE_SPEC)),
        opt(7, "backoffLimit", Int),
        opt(8, "ttlSecondsAfterFinished", Int),
        opt(9, "completionMode", Str),
        opt(10, "suspend", Bool),
        opt(12, "backoffLimitPerIndex", Int),
        opt(13, "maxFailedIndexes", Int),
        opt(14, "podReplacementPolicy", Str),
        opt(15, "managedBy", Str),
    ],
};

/// `batch.v1.JobStatus` as clients send it on create: counters only.
pub static JOB_STATUS: Message = Message {
    name: "JobStatus",
    fields: &[
        f(4, "active", Int),
        f(5, "succeeded", Int),
        f(6, "failed", Int),
        f(7, "completedIndexes", Str),
        opt(10, "failedIndexes", Str),
        opt(9, "ready", Int),
        opt(11, "terminating", Int),
    ],
};

/// `batch.v1.Job` (what `kubectl create job` sends).
pub static JOB: Message = Message {
    name: "Job",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&JOB_SPEC)),
        f(3, "status", Msg(&JOB_STATUS)),
    ],
};

/// `batch.v1.JobTemplateSpec`.
pub static JOB_TEMPLATE_SPEC: Message = Message {
    name: "JobTemplateSpec",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&JOB_SPEC)),
    ],
};

/// `batch.v1.CronJobSpec`.
pub static CRON_JOB_SPEC: Message = Message {
    name: "CronJobSpec",
    fields: &[
        f(1, "schedule", Str),
        opt(8, "timeZone", Str),
        opt(2, "startingDeadlineSeconds", Int),
        f(3, "concurrencyPolicy", Str),
        opt(4, "suspend", Bool),
        f(5, "jobTemplate", Msg(&JOB_TEMPLATE_SPEC)),
        opt(6, "successfulJobsHistoryLimit", Int),
        opt(7, "failedJobsHistoryLimit", Int),
    ],
};

/// `batch.v1.CronJobStatus` as clients send it on create: nothing.
pub static CRON_JOB_STATUS: Message = Message {
    name: "CronJobStatus",
    fields: &[],
};

/// `batch.v1.CronJob` (what `kubectl create cronjob` sends).
pub static CRON_JOB: Message = Message {
    name: "CronJob",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&CRON_JOB_SPEC)),
        f(3, "status", Msg(&CRON_JOB_STATUS)),
    ],
};

/// `networking.v1.ServiceBackendPort`.
pub static SERVICE_BACKEND_PORT: Message = Message {
    name: "ServiceBackendPort",
    fields: &[f(1, "name", Str), f(2, "number", Int)],
};

/// `networking.v1.IngressServiceBackend`.
pub static INGRESS_SERVICE_BACKEND: Message = Message {
    name: "IngressServiceBackend",
    fields: &[f(1, "name", Str), f(2, "port", Msg(&SERVICE_BACKEND_PORT))],
};

/// `networking.v1.IngressBackend` (service backends).
pub static INGRESS_BACKEND: Message = Message {
    name: "IngressBackend",
    fields: &[opt(4, "service", Msg(&INGRESS_SERVICE_BACKEND))],
};

/// `networking.v1.HTTPIngressPath`.
pub static HTTP_INGRESS_PATH: Message = Message {
    name: "HTTPIngressPath",
    fields: &[
        f(1, "path", Str),
        opt(3, "pathType", Str),
        f(2, "backend", Msg(&INGRESS_BACKEND)),
    ],
};

/// `networking.v1.HTTPIngressRuleValue`.
pub static HTTP_INGRESS_RULE_VALUE: Message = Message {
    name: "HTTPIngressRuleValue",
    fields: &[rep(1, "paths", Msg(&HTTP_INGRESS_PATH))],
};

/// `networking.v1.IngressRuleValue`, inlined in its rule.
pub static INGRESS_RULE_VALUE: Message = Message {
    name: "IngressRuleValue",
    fields: &[opt(1, "http", Msg(&HTTP_INGRESS_RULE_VALUE))],
};

/// `networking.v1.IngressRule`.
pub static INGRESS_RULE: Message = Message {
    name: "IngressRule",
    fields: &[
        f(1, "host", Str),
        f(2, "ingressRuleValue", Inline(&INGRESS_RULE_VALUE)),
    ],
};

/// `networking.v1.IngressTLS`.
pub static INGRESS_TLS: Message = Message {
    name: "IngressTLS",
    fields: &[rep(1, "hosts", Str), f(2, "secretName", Str)],
};

/// `networking.v1.IngressSpec`.
pub static INGRESS_SPEC: Message = Message {
    name: "IngressSpec",
    fields: &[
        opt(4, "ingressClassName", Str),
        opt(1, "defaultBackend", Msg(&INGRESS_BACKEND)),
        rep(2, "tls", Msg(&INGRESS_TLS)),
        rep(3, "rules", Msg(&INGRESS_RULE)),
    ],
};

/// `networking.v1.IngressLoadBalancerIngress` (address fields only).
pub static INGRESS_LOAD_BALANCER_INGRESS: Message = Message {
    name: "IngressLoadBalancerIngress",
    fields: &[f(1, "ip", Str), f(2, "hostname", Str)],
};

/// `networking.v1.IngressLoadBalancerStatus`.
pub static INGRESS_LOAD_BALANCER_STATUS: Message = Message {
    name: "IngressLoadBalancerStatus",
    fields: &[rep(1, "ingress", Msg(&INGRESS_LOAD_BALANCER_INGRESS))],
};

/// `networking.v1.IngressStatus`.
pub static INGRESS_STATUS: Message = Message {
    name: "IngressStatus",
    fields: &[f(1, "loadBalancer", Msg(&INGRESS_LOAD_BALANCER_STATUS))],
};

/// `networking.v1.Ingress` (what `kubectl create ingress` sends).
pub static INGRESS: Message = Message {
    name: "Ingress",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&INGRESS_SPEC)),
        f(3, "status", Msg(&INGRESS_STATUS)),
    ],
};

/// `authorization.v1.SelfSubjectRulesReviewSpec`.
pub static RULES_REVIEW_SPEC: Message = Message {
    name: "SelfSubjectRulesReviewSpec",
    fields: &[f(1, "namespace", Str)],
};

/// `authorization.v1.SubjectRulesReviewStatus` as clients send it: empty.
pub static RULES_REVIEW_STATUS: Message = Message {
    name: "SubjectRulesReviewStatus",
    fields: &[f(3, "incomplete", Bool), f(4, "evaluationError", Str)],
};

/// `authorization.v1.SelfSubjectRulesReview` (what `kubectl auth can-i --list` sends).
pub static SELF_SUBJECT_RULES_REVIEW: Message = Message {
    name: "SelfSubjectRulesReview",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&RULES_REVIEW_SPEC)),
        f(3, "status", Msg(&RULES_REVIEW_STATUS)),
    ],
};

/// `authentication.v1.BoundObjectReference`.
pub static BOUND_OBJECT_REFERENCE: Message = Message {
    name: "BoundObjectReference",
    fields: &[
        f(1, "kind", Str),
        f(2, "apiVersion", Str),
        f(3, "name", Str),
        f(4, "uid", Str),
    ],
};

/// `authentication.v1.TokenRequestSpec`.
pub static TOKEN_REQUEST_SPEC: Message = Message {
    name: "TokenRequestSpec",
    fields: &[
        rep(1, "audiences", Str),
        opt(4, "expirationSeconds", Int),
        opt(3, "boundObjectRef", Msg(&BOUND_OBJECT_REFERENCE)),
    ],
};

/// `authentication.v1.TokenRequestStatus` as clients send it: empty.
pub static TOKEN_REQUEST_STATUS: Message = Message {
    name: "TokenRequestStatus",
    fields: &[f(1, "token", Str), f(2, "expirationTimestamp", Time)],
};

/// `authentication.v1.TokenRequest` (what `kubectl create token` sends).
pub static TOKEN_REQUEST: Message = Message {
    name: "TokenRequest",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&TOKEN_REQUEST_SPEC)),
        f(3, "status", Msg(&TOKEN_REQUEST_STATUS)),
    ],
};

/// `core.v1.ScopedResourceSelectorRequirement`.
pub static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Message = Message {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        f(1, "scopeName", Str),
        f(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

/// `core.v1.ScopeSelector`.
pub static SCOPE_SELECTOR: Message = Message {
    name: "ScopeSelector",
    fields: &[rep(
        1,
        "matchExpressions",
        Msg(&SCOPED_RESOURCE_SELECTOR_REQUIREMENT),
    )],
};

/// `core.v1.ResourceQuotaSpec`.
pub static RESOURCE_QUOTA_SPEC: Message = Message {
    name: "ResourceQuotaSpec",
    fields: &[
        f(1, "hard", MapQuantity),
        rep(2, "scopes", Str),
        opt(3, "scopeSelector", Msg(&SCOPE_SELECTOR)),
    ],
};

/// `core.v1.ResourceQuotaStatus`.
pub static RESOURCE_QUOTA_STATUS: Message = Message {
    name: "ResourceQuotaStatus",
    fields: &[f(1, "hard", MapQuantity), f(2, "used", MapQuantity)],
};

/// `core.v1.ResourceQuota` (what `kubectl create quota` sends).
pub static RESOURCE_QUOTA: Message = Message {
    name: "ResourceQuota",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&RESOURCE_QUOTA_SPEC)),
        f(3, "status", Msg(&RESOURCE_QUOTA_STATUS)),
    ],
};

/// `policy.v1.PodDisruptionBudgetSpec`.
pub static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "PodDisruptionBudgetSpec",
    fields: &[
        opt(1, "minAvailable", IntOrString),
        opt(2, "selector", Msg(&LABEL_SELECTOR)),
        opt(3, "maxUnavailable", IntOrString),
        opt(4, "unhealthyPodEvictionPolicy", Str),
    ],
};

/// `policy.v1.PodDisruptionBudgetStatus` as clients send it: counts only (no disrupted pods or
/// conditions, which the disruption controller writes).
pub static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "PodDisruptionBudgetStatus",
    fields: &[
        f(1, "observedGeneration", Int),
        f(3, "disruptionsAllowed", Int),
        f(4, "currentHealthy", Int),
        f(5, "desiredHealthy", Int),
        f(6, "expectedPods", Int),
    ],
};

/// `policy.v1.PodDisruptionBudget` (what `kubectl create poddisruptionbudget` sends).
pub static POD_DISRUPTION_BUDGET: Message = Message {
    name: "PodDisruptionBudget",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        f(2, "spec", Msg(&POD_DISRUPTION_BUDGET_SPEC)),
        f(3, "status", Msg(&POD_DISRUPTION_BUDGET_STATUS)),
    ],
};

/// `scheduling.v1.PriorityClass` (what `kubectl create priorityclass` sends). `value` is not
/// `omitempty` in Go, so a zero is kept.
pub static PRIORITY_CLASS: Message = Message {
    name: "PriorityClass",
    fields: &[
        f(1, "metadata", Msg(&OBJECT_META)),
        opt(2, "value", Int),
        f(3, "globalDefault", Bool),
        f(4, "description", Str),
        opt(5, "preemptionPolicy", Str),
    ],
};

/// The kinds accepted as protobuf, by `apiVersion` and `kind`.
pub static KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "Secret", &SECRET),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("batch/v1", "Job", &JOB),
    ("batch/v1", "CronJob", &CRON_JOB),
    ("networking.k8s.io/v1", "Ingress", &INGRESS),
    ("v1", "ResourceQuota", &RESOURCE_QUOTA),
    ("policy/v1", "PodDisruptionBudget", &POD_DISRUPTION_BUDGET),
    ("scheduling.k8s.io/v1", "PriorityClass", &PRIORITY_CLASS),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("authentication.k8s.io/v1", "TokenRequest", &TOKEN_REQUEST),
    (
        "authorization.k8s.io/v1",
        "SelfSubjectRulesReview",
        &SELF_SUBJECT_RULES_REVIEW,
    ),
    ("rbac.authorization.k8s.io/v1", "Role", &ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &ROLE_BINDING),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &ROLE_BINDING,
    ),
];
