{{/* Chart name, overridable. */}}
{{- define "inferd.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Fully qualified app name; 63 chars max (DNS label). */}}
{{- define "inferd.fullname" -}}
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

{{/* Headless Service name; the suffix must fit in 63 chars. */}}
{{- define "inferd.headlessName" -}}
{{- printf "%s-headless" (include "inferd.fullname" . | trunc 54 | trimSuffix "-") }}
{{- end }}

{{- define "inferd.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Kubernetes recommended labels. */}}
{{- define "inferd.labels" -}}
helm.sh/chart: {{ include "inferd.chart" . }}
{{ include "inferd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: server
app.kubernetes.io/part-of: inferd
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels: stable across upgrades (never add version here). */}}
{{- define "inferd.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inferd.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "inferd.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "inferd.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "inferd.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}

{{/* Name of the Secret holding the API keys. */}}
{{- define "inferd.apiKeySecretName" -}}
{{- if .Values.apiKey.existingSecret }}
{{- .Values.apiKey.existingSecret }}
{{- else }}
{{- printf "%s-api-key" (include "inferd.fullname" .) }}
{{- end }}
{{- end }}

{{/*
Kernel threads: server.threads, else the CPU limit (or request) when it is a
whole number of cores ("2", 2, "2000m"); empty when neither applies.
*/}}
{{- define "inferd.threads" -}}
{{- if .Values.server.threads }}
{{- .Values.server.threads }}
{{- else }}
{{- $res := .Values.resources | default dict }}
{{- $cpu := "" }}
{{- with $res.limits }}{{- with .cpu }}{{ $cpu = toString . }}{{- end }}{{- end }}
{{- if not $cpu }}
{{- with $res.requests }}{{- with .cpu }}{{ $cpu = toString . }}{{- end }}{{- end }}
{{- end }}
{{- if regexMatch "^[1-9][0-9]*$" $cpu }}
{{- $cpu }}
{{- else if regexMatch "^[1-9][0-9]*000m$" $cpu }}
{{- trimSuffix "000m" $cpu }}
{{- end }}
{{- end }}
{{- end }}

{{/* grpc or tcp, resolving probes.type=auto. */}}
{{- define "inferd.probeType" -}}
{{- if eq .Values.probes.type "auto" }}grpc
{{- else }}
{{- .Values.probes.type }}
{{- end }}
{{- end }}

{{/* The probe action: gRPC health on the serving port, or on the plaintext
health port when TLS is on; or a TCP check of the serving port. */}}
{{- define "inferd.probeAction" -}}
{{- if eq (include "inferd.probeType" .) "grpc" }}
grpc:
  port: {{ if .Values.tls.enabled }}{{ .Values.server.healthPort }}{{ else }}{{ .Values.server.grpcPort }}{{ end }}
{{- else }}
tcpSocket:
  port: grpc
{{- end }}
{{- end }}

{{/* Pod termination grace: preStop + drain + margin, or the explicit value. */}}
{{- define "inferd.terminationGrace" -}}
{{- $needed := add (int .Values.preStopSleepSeconds) (int .Values.server.drainTimeoutSeconds) }}
{{- if .Values.terminationGracePeriodSeconds }}
{{- if le (int .Values.terminationGracePeriodSeconds) $needed }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must exceed preStopSleepSeconds + server.drainTimeoutSeconds (%d), or the kubelet kills inferd before it drains" (int .Values.terminationGracePeriodSeconds) $needed) }}
{{- end }}
{{- .Values.terminationGracePeriodSeconds }}
{{- else }}
{{- add $needed (int .Values.terminationGraceMarginSeconds) }}
{{- end }}
{{- end }}

{{/* inferd's command-line arguments, one YAML list item per token. */}}
{{- define "inferd.args" -}}
{{- $s := .Values.server }}
- --listen
- {{ printf "0.0.0.0:%d" (int $s.grpcPort) | quote }}
{{- range $s.plugins }}
- --plugin
- {{ . | quote }}
{{- end }}
{{- range $s.models }}
- --model
- {{ printf "%s=%s" .name .path | quote }}
{{- end }}
{{- if .Values.metrics.enabled }}
- --metrics-listen
- {{ printf "0.0.0.0:%d" (int .Values.metrics.port) | quote }}
{{- end }}
{{- with include "inferd.threads" . }}
- --threads
- {{ . | quote }}
{{- end }}
{{- $intFlags := list
      (list "replicasPerModel" "--replicas-per-model")
      (list "maxBatchedTokens" "--max-batched-tokens")
      (list "maxSeqs" "--max-seqs")
      (list "maxQueueRequests" "--max-queue-requests")
      (list "maxQueueTokens" "--max-queue-tokens")
      (list "maxInputsPerRequest" "--max-inputs-per-request")
      (list "maxInputTokens" "--max-input-tokens")
      (list "maxConcurrentStreams" "--max-concurrent-streams")
      (list "maxReceiveMessageBytes" "--max-receive-message-bytes")
      (list "blockSize" "--block-size") }}
{{- range $intFlags }}
{{- $v := index $s (index . 0) }}
{{- if not (kindIs "invalid" $v) }}
- {{ index . 1 }}
- {{ $v | int64 | toString | quote }}
{{- end }}
{{- end }}
{{- if not (kindIs "invalid" $s.kvCacheMemory) }}
- --kv-cache-memory
- {{ $s.kvCacheMemory | toString | quote }}
{{- end }}
{{- with $s.dtype }}
- --dtype
- {{ . | quote }}
{{- end }}
{{- with $s.logFormat }}
- --log-format
- {{ . | quote }}
{{- end }}
{{- with $s.logLevel }}
- --log-level
- {{ . | quote }}
{{- end }}
- --drain-timeout
- {{ $s.drainTimeoutSeconds | int | toString | quote }}
{{- if .Values.tls.enabled }}
- --health-listen
- {{ printf "0.0.0.0:%d" (int $s.healthPort) | quote }}
- --tls-cert
- /etc/inferd/tls/tls.crt
- --tls-key
- /etc/inferd/tls/tls.key
{{- if .Values.tls.clientCA.enabled }}
- --tls-client-ca
- {{ printf "/etc/inferd/tls-client-ca/%s" .Values.tls.clientCA.key | quote }}
{{- end }}
{{- end }}
{{- if .Values.apiKey.enabled }}
- --api-key-file
- {{ printf "/etc/inferd/api-key/%s" .Values.apiKey.secretKey | quote }}
{{- end }}
{{- range $s.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}
