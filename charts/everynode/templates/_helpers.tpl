{{/* The name of every object of the release. */}}
{{- define "everynode.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "everynode.serviceAccountName" -}}
{{- default (include "everynode.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The labels that select the controller's pods. */}}
{{- define "everynode.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "everynode.labels" -}}
{{ include "everynode.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
everynode.dev/mode: {{ .Values.mode }}
{{- end -}}
