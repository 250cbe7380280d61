{{/* The chart name. */}}
{{- define "batchledger.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The prefix of every resource name: "batchledger" for a release named batchledger, as
config/default's namePrefix. Kept short: webhook configuration names append 30 characters.
*/}}
{{- define "batchledger.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 30 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 30 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 30 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "batchledger.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{ include "batchledger.selectorLabels" . }}
{{- end }}

{{/* Labels that select the manager pods. */}}
{{- define "batchledger.selectorLabels" -}}
app.kubernetes.io/name: {{ include "batchledger.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end }}

{{- define "batchledger.serviceAccountName" -}}
{{ include "batchledger.fullname" . }}-controller-manager
{{- end }}

{{- define "batchledger.webhookServiceName" -}}
{{ include "batchledger.fullname" . }}-webhook-service
{{- end }}

{{- define "batchledger.webhookSecretName" -}}
{{ include "batchledger.fullname" . }}-webhook-server-cert
{{- end }}

{{- define "batchledger.ledgerKeySecretName" -}}
{{ include "batchledger.fullname" . }}-ledger-key
{{- end }}

{{- define "batchledger.metricsServiceName" -}}
{{ include "batchledger.fullname" . }}-controller-manager-metrics-service
{{- end }}

{{/* The webhook configuration named for a kind: FULLNAME-mutating-webhook-configuration. */}}
{{- define "batchledger.webhookConfigurationName" -}}
{{ include "batchledger.fullname" .root }}-{{ if eq .kind "MutatingWebhookConfiguration" }}mutating{{ else }}validating{{ end }}-webhook-configuration
{{- end }}

{{/* certMode validated: self or certManager. */}}
{{- define "batchledger.certMode" -}}
{{- $m := .Values.webhook.certMode }}
{{- if not (has $m (list "self" "certManager")) }}
{{- fail (printf "webhook.certMode must be self or certManager, not %q" $m) }}
{{- end }}
{{- $m }}
{{- end }}

{{/*
The documents of a file made by `make generate` (files/generated), as a list of maps;
empty documents are dropped.
*/}}
{{- define "batchledger.generatedDocs" -}}
{{- $docs := list }}
{{- range $doc := regexSplit "(?m)^---\\s*$" (.root.Files.Get (printf "files/generated/%s" .file)) -1 }}
{{- $obj := fromYaml $doc }}
{{- if $obj.kind }}
{{- $docs = append $docs $obj }}
{{- end }}
{{- end }}
{{- toJson $docs }}
{{- end }}

{{/*
The role validated: manager (batchledger as on one cluster, or a MultiKueue manager) or
worker (batchledger --role=worker on a MultiKueue worker cluster; docs/multikueue.md).
*/}}
{{- define "batchledger.role" -}}
{{- $r := .Values.role }}
{{- if not (has $r (list "manager" "worker")) }}
{{- fail (printf "role must be manager or worker, not %q" $r) }}
{{- end }}
{{- if and (eq $r "worker") (ne .Values.webhook.certMode "certManager") }}
{{- fail "role: worker needs webhook.certMode: certManager: the worker role's RBAC (config/worker) grants no write on Secrets or webhook configurations, which self-managed certificates need" }}
{{- end }}
{{- $r }}
{{- end }}

{{/* The worker role's ServiceAccount: config/worker's "worker", named for the release. */}}
{{- define "batchledger.workerServiceAccountName" -}}
{{ include "batchledger.fullname" . }}-worker
{{- end }}

{{/*
Whether the manager serves metrics: metrics.enabled, and not role: worker, whose RBAC
(config/worker) grants none of the TokenReview and SubjectAccessReview calls secure
metrics make. "true" or "".
*/}}
{{- define "batchledger.metricsEnabled" -}}
{{- if and .Values.metrics.enabled (eq (include "batchledger.role" .) "manager") }}true{{ end }}
{{- end }}
