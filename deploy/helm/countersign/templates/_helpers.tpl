{{/* The name of every object: the release's, with the chart's. */}}
{{- define "countersign.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels that select the pods. */}}
{{- define "countersign.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "countersign.labels" -}}
{{ include "countersign.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "countersign.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
The config file: values.config merged over nothing, then what the chart
decides: PostgreSQL, the database URL from the environment, the listen
port, the mounted signing key, and the anchor file on the shared volume
(anchors.enabled). audit.anchor.every may still be set in values.config.
*/}}
{{- define "countersign.config" -}}
{{- $forced := dict
  "listen" (printf ":%v" .Values.service.targetPort)
  "store" (dict "engine" "postgres" "postgres" (dict "dsn_env" "COUNTERSIGN_DATABASE_URL"))
  "audit" (dict "signing_key" (printf "%s/%s" .Values.signingKey.mountPath .Values.signingKey.key)) -}}
{{- if .Values.anchors.enabled }}
{{- $_ := set $forced.audit "anchor" (dict "file" (printf "%s/audit.anchors" .Values.anchors.mountPath)) }}
{{- end }}
{{- toYaml (mustMergeOverwrite (deepCopy .Values.config) $forced) -}}
{{- end -}}

{{/*
The anchor volume's claim: the one given, or the chart's.
*/}}
{{- define "countersign.anchorClaim" -}}
{{- default (printf "%s-anchors" (include "countersign.fullname" .)) .Values.anchors.existingClaim -}}
{{- end -}}
