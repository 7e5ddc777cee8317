{{/* The chart name, truncated to a DNS label. */}}
{{- define "rollsafe.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The object name prefix. */}}
{{- define "rollsafe.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "rollsafe.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "rollsafe.labels" -}}
helm.sh/chart: {{ include "rollsafe.chart" . }}
{{ include "rollsafe.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rollsafe
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The server's selector labels. */}}
{{- define "rollsafe.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rollsafe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end -}}

{{/* The ServiceAccount the server runs as. */}}
{{- define "rollsafe.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rollsafe.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The Secret holding SESSION_SECRET. */}}
{{- define "rollsafe.sessionSecretName" -}}
{{- default (printf "%s-session" (include "rollsafe.fullname" .)) .Values.session.existingSecret -}}
{{- end -}}

{{/* image reference: digest wins over tag; tag defaults to appVersion. */}}
{{- define "rollsafe.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The namespaces whose Roles grant workload access: the release namespace in namespace scope,
the listed namespaces in cluster scope with a list; empty in cluster scope without a list
(ClusterRoles instead).
*/}}
{{- define "rollsafe.roleNamespaces" -}}
{{- if eq .Values.server.scope "namespace" -}}
{{- list .Release.Namespace | toJson -}}
{{- else -}}
{{- .Values.server.namespaces | uniq | toJson -}}
{{- end -}}
{{- end -}}

{{/* The container port of the API and of the metrics listener. */}}
{{- define "rollsafe.apiPort" -}}8080{{- end -}}
{{- define "rollsafe.metricsPort" -}}9090{{- end -}}

{{/* What a restart run needs when the server makes the calls as itself. */}}
{{- define "rollsafe.restartRules" -}}
# The live Secret read (gate 5): get by name, never list or watch.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# The paged inventory of the three kinds and the one JSON Patch per match.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["list", "patch"]
{{- end -}}

{{/*
Whether impersonation is constrained (KEP-5284): "true" or "false". `auto` is true when the
cluster's version is 1.36 or newer, where the ConstrainedImpersonation feature is beta and on.
*/}}
{{- define "rollsafe.constrainedImpersonation" -}}
{{- $constrained := .Values.impersonation.constrained -}}
{{- if eq (toString $constrained) "auto" -}}
{{- semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version | toString -}}
{{- else -}}
{{- $constrained | toString -}}
{{- end -}}
{{- end -}}

{{/*
What the server does as the caller under constrained impersonation: the verbs the API server
checks as `impersonate-on:<mode>:<verb>` on the request itself — the Secret read, the
inventory's lists and the patches (restarts and approvals) — for users (`user-info`) and, with
TokenReview, for ServiceAccounts (`serviceaccount`). Nothing else may be done as anyone.
*/}}
{{- define "rollsafe.impersonateOnRules" -}}
{{- $modes := list "user-info" -}}
{{- if .Values.tokenReview.enabled }}{{ $modes = append $modes "serviceaccount" }}{{ end -}}
# The live Secret read (gate 5), as the caller.
- apiGroups: [""]
  resources: ["secrets"]
  verbs:
  {{- range $modes }}
    - {{ printf "impersonate-on:%s:get" . | quote }}
  {{- end }}
# The paged inventory and the one JSON Patch per match (a restart, an approval), as the caller.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs:
  {{- range $modes }}
    - {{ printf "impersonate-on:%s:list" . | quote }}
    - {{ printf "impersonate-on:%s:patch" . | quote }}
  {{- end }}
{{- end -}}

{{/* The controller's selector labels. */}}
{{- define "rollsafe.controllerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "rollsafe.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: controller
{{- end -}}

{{/* Labels every controller object carries. */}}
{{- define "rollsafe.controllerLabels" -}}
helm.sh/chart: {{ include "rollsafe.chart" . }}
{{ include "rollsafe.controllerSelectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: rollsafe
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The ServiceAccount the controller runs as. */}}
{{- define "rollsafe.controllerServiceAccountName" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- default (printf "%s-controller" (include "rollsafe.fullname" .)) .Values.controller.serviceAccount.name -}}
{{- else -}}
{{- required "controller.serviceAccount.name is required when controller.serviceAccount.create is false" .Values.controller.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
What the controller needs in every namespace it watches (docs/watch.md, RBAC): the watch
streams (list + watch) of Secrets, ConfigMaps and the three workload kinds, the one JSON Patch
per roll or record, and its Events. No get, no update, no delete.
*/}}
{{- define "rollsafe.controllerRules" -}}
# The Secret and ConfigMap watch streams (crates/rollsafe-watch/src/controller.rs, watcher).
- apiGroups: [""]
  resources: ["secrets", "configmaps"]
  verbs: ["list", "watch"]
# The workload watch streams and the JSON Patch of a roll or a record.
- apiGroups: ["apps"]
  resources: ["deployments", "statefulsets", "daemonsets"]
  verbs: ["list", "watch", "patch"]
# CronJobs: their Jobs' pod template is rolled (the next scheduled Job runs with it).
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["list", "watch", "patch"]
{{- if .Values.controller.argoRollouts }}
# Argo Rollouts (controller.argoRollouts): their pod template is rolled.
- apiGroups: ["argoproj.io"]
  resources: ["rollouts"]
  verbs: ["list", "watch", "patch"]
{{- end }}
# Rolled / Halted / RolloutDeferred Events (kube's Recorder: create, then patch on repeats).
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
# The eviction strategy (rollsafe.dev/strategy: evict, docs/strategies.md): a run lists its
# workload by name (selector, pacing: the list above), lists its pods on demand (never watched
# or cached) and the PodDisruptionBudgets, and evicts through the Eviction API, which honours
# the budgets.
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["list"]
- apiGroups: [""]
  resources: ["pods/eviction"]
  verbs: ["create"]
- apiGroups: ["policy"]
  resources: ["poddisruptionbudgets"]
  verbs: ["list"]
{{- end -}}
