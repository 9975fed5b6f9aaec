{{/* Names. */}}
{{- define "gpupolicy.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpupolicy.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpupolicy.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "gpupolicy.labels" -}}
helm.sh/chart: {{ include "gpupolicy.chart" . }}
{{ include "gpupolicy.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: admission-webhook
app.kubernetes.io/part-of: gpupolicy
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "gpupolicy.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpupolicy.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "gpupolicy.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpupolicy.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The Secret that holds tls.crt and tls.key. */}}
{{- define "gpupolicy.tlsSecretName" -}}
{{- if .Values.tls.certManager.enabled }}
{{- printf "%s-tls" (include "gpupolicy.fullname" .) }}
{{- else }}
{{- required "tls.existingSecret is required when tls.certManager.enabled is false" .Values.tls.existingSecret }}
{{- end }}
{{- end }}

{{- define "gpupolicy.certificateName" -}}
{{- printf "%s-serving" (include "gpupolicy.fullname" .) }}
{{- end }}

{{- define "gpupolicy.issuerName" -}}
{{- printf "%s-selfsigned" (include "gpupolicy.fullname" .) }}
{{- end }}

{{- define "gpupolicy.dbSecretName" -}}
{{- default (printf "%s-db" (include "gpupolicy.fullname" .)) .Values.provenance.db.existingSecret }}
{{- end }}

{{- define "gpupolicy.dbEnabled" -}}
{{- if and .Values.provenance.enabled (or .Values.provenance.db.existingSecret .Values.provenance.db.url) }}true{{- end }}
{{- end }}

{{/* Namespaces the webhook never sees: kube-system, the release namespace, and the extras. */}}
{{- define "gpupolicy.excludedNamespaces" -}}
{{- $namespaces := list "kube-system" .Release.Namespace }}
{{- range .Values.webhook.excludedNamespaces }}
{{- $namespaces = append $namespaces . }}
{{- end }}
{{- toJson (uniq $namespaces) }}
{{- end }}

{{- define "gpupolicy.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/* The policy layer the chart mounts: values.policy with the webhook keys the chart owns. */}}
{{- define "gpupolicy.policy" -}}
{{- $policy := deepCopy (default dict .Values.policy) }}
{{- $webhook := deepCopy (default dict (get $policy "webhook")) }}
{{- $_ := set $webhook "excludedNamespaces" (include "gpupolicy.excludedNamespaces" . | fromJsonArray) }}
{{- if .Values.namespaceModes }}
{{- $_ := set $webhook "namespaceModes" .Values.namespaceModes }}
{{- end }}
{{- $_ := set $policy "webhook" $webhook }}
{{- toYaml $policy }}
{{- end }}

{{- define "gpupolicy.volumeClaimName" -}}data{{- end }}
