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

{{/* An emptyDir source from {medium, sizeLimit} as JSON; {} when neither is
set (a bare `emptyDir:` would be null, a volume without a source). */}}
{{- define "inferd.emptyDir" -}}
{{- $e := dict }}
{{- with .medium }}{{ $_ := set $e "medium" . }}{{ end }}
{{- with .sizeLimit }}{{ $_ := set $e "sizeLimit" . }}{{ end }}
{{- toJson $e }}
{{- end }}

{{/* Where the ConfigMap's config.yaml is mounted in the pod. */}}
{{- define "inferd.configDir" -}}/etc/inferd/config{{- end }}

{{- define "inferd.configMapName" -}}
{{- printf "%s-config" (include "inferd.fullname" .) }}
{{- end }}

{{/*
[valueKey, configKey] of the engine options a model can override; the
server-wide values use the same keys (plus threads and replicasPerModel).
*/}}
{{- define "inferd.engineKeys" -}}
- [tokenizationWorkers, tokenization-workers]
- [maxBatchedTokens, max-batched-tokens]
- [maxPrefillTokensWhileDecoding, max-prefill-tokens-while-decoding]
- [overlapOutput, overlap-output]
- [maxSeqs, max-seqs]
- [maxQueueRequests, max-queue-requests]
- [maxQueueTokens, max-queue-tokens]
- [maxInputTokens, max-input-tokens]
- [kvCacheMemory, kv-cache-memory]
- [blockSize, block-size]
- [enablePrefixCaching, enable-prefix-caching]
- [speculativeDraftTokens, speculative-draft-tokens]
- [dtype, dtype]
- [activations, activations]
{{- end }}

{{/*
`key: value` lines for each (valueKey configKey) pair in .keys whose value in
.values is set; null and absent values are left out so that the server's
default (or, in a model, the server-wide value) applies. Values are written
as JSON scalars, which YAML reads back unchanged ("4GiB" stays a string,
0.5 a number).
*/}}
{{- define "inferd.configLines" -}}
{{- $values := .values }}
{{- range .keys }}
{{- $v := index $values (index . 0) }}
{{- if not (kindIs "invalid" $v) }}
{{ index . 1 }}: {{ $v | toJson }}
{{- end }}
{{- end }}
{{- end }}

{{/*
config.yaml for `inferd --config`: the server's flags without the dashes,
then the models. Secret file paths (TLS, API key) stay on the command line
next to their Secret mounts.
*/}}
{{- define "inferd.config" -}}
{{- $s := .Values.server }}
{{- $engine := include "inferd.engineKeys" . | fromYamlArray }}
{{- $serverKeys := concat
      (list (list "threads" "threads") (list "replicasPerModel" "replicas-per-model"))
      $engine
      (list
        (list "maxInputsPerRequest" "max-inputs-per-request")
        (list "maxConcurrentStreams" "max-concurrent-streams")
        (list "maxReceiveMessageBytes" "max-receive-message-bytes")
        (list "mmapWeights" "mmap-weights")
        (list "allowPartialStart" "allow-partial-start")
        (list "maxLoadedModels" "max_loaded_models")
        (list "maxConnectionAgeSeconds" "max-connection-age")
        (list "maxConnectionAgeGraceSeconds" "max-connection-age-grace")
        (list "logFormat" "log-format")
        (list "logLevel" "log-level")
        (list "drainTimeoutSeconds" "drain-timeout")) }}
{{- $modelKeys := concat
      (list (list "load" "load") (list "keepAlive" "keep_alive")
            (list "task" "task") (list "pooling" "pooling")
            (list "bidirectional" "bidirectional") (list "threads" "threads")
            (list "replicas" "replicas"))
      $engine -}}
listen: {{ printf "0.0.0.0:%d" (int $s.grpcPort) | toJson }}
{{- if .Values.metrics.enabled }}
metrics-listen: {{ printf "0.0.0.0:%d" (int .Values.metrics.port) | toJson }}
{{- end }}
{{- if .Values.http.enabled }}
http-listen: {{ printf "0.0.0.0:%d" (int .Values.http.port) | toJson }}
{{- end }}
{{- if .Values.tls.enabled }}
health-listen: {{ printf "0.0.0.0:%d" (int $s.healthPort) | toJson }}
{{- end }}
{{- include "inferd.configLines" (dict "values" $s "keys" $serverKeys) }}
{{- with $s.plugins }}
plugins:
{{- range . }}
  - {{ . | toJson }}
{{- end }}
{{- end }}
models:
{{- $seen := dict }}
{{- range $s.models }}
{{- if hasKey $seen .name }}
{{- fail (printf "server.models: the name '%s' is given twice" .name) }}
{{- end }}
{{- $_ := set $seen .name true }}
  - name: {{ .name | toJson }}
    path: {{ .path | toJson }}
{{- with include "inferd.configLines" (dict "values" . "keys" $modelKeys) | trim }}
    {{- . | nindent 4 }}
{{- end }}
{{- end }}
{{- end }}

{{/* The config file as mounted, and its checksum for the pod template. */}}
{{- define "inferd.configFile" -}}
{{- printf "%s\n" (include "inferd.config" . | trim) }}
{{- end }}

{{/* inferd's command-line arguments, one YAML list item per token. */}}
{{- define "inferd.args" -}}
- --config
- {{ printf "%s/config.yaml" (include "inferd.configDir" .) | quote }}
{{- if .Values.tls.enabled }}
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
{{- range .Values.server.extraArgs }}
- {{ . | quote }}
{{- end }}
{{- end }}

{{/*
Models by Hugging Face Hub name. A model's path is a Hub name when it does
not start with "/" (org/repo, org/repo:QUANT, org/repo/file.gguf, each with
an optional @REVISION; the schema checks the spelling). The Hugging Face
pieces (cache volume, HF_* environment, token Secret) are rendered when
huggingface.enabled is true or any model has such a path: "true" or "".
*/}}
{{- define "inferd.hf.isHubName" -}}
{{- if not (hasPrefix "/" .) }}true{{ end }}
{{- end }}

{{- define "inferd.hf.enabled" -}}
{{- $on := .Values.huggingface.enabled }}
{{- range .Values.server.models }}
{{- if include "inferd.hf.isHubName" .path }}{{ $on = true }}{{ end }}
{{- end }}
{{- if $on }}true{{ end }}
{{- end }}

{{/* The Secret holding HF_TOKEN, or "" when no token is configured. */}}
{{- define "inferd.hf.tokenSecretName" -}}
{{- $t := .Values.huggingface.token }}
{{- if $t.existingSecret }}
{{- $t.existingSecret }}
{{- else if $t.value }}
{{- printf "%s-hf-token" (include "inferd.fullname" .) }}
{{- end }}
{{- end }}

{{/* "true" when the chart creates the cache PVC. */}}
{{- define "inferd.hf.createPvc" -}}
{{- $c := .Values.huggingface.cache }}
{{- if and (include "inferd.hf.enabled" .) (eq $c.type "pvc") (not $c.pvc.claimName) }}true{{ end }}
{{- end }}

{{- define "inferd.hf.pvcName" -}}
{{- .Values.huggingface.cache.pvc.claimName | default (printf "%s-hf-cache" (include "inferd.fullname" .)) }}
{{- end }}

{{/*
"true" when the chart-created cache PVC can be attached by one node only
(no ReadWriteMany): then one pod at a time, and the Deployment recreates
its pod instead of surging a second one that could not start elsewhere.
*/}}
{{- define "inferd.hf.singleAttachCache" -}}
{{- if and (include "inferd.hf.createPvc" .) (not (has "ReadWriteMany" .Values.huggingface.cache.pvc.accessModes)) }}true{{ end }}
{{- end }}

{{/* Fails on Hugging Face settings that cannot work together. */}}
{{- define "inferd.hf.validate" -}}
{{- $hf := .Values.huggingface }}
{{- if and $hf.token.existingSecret $hf.token.value }}
{{- fail "huggingface.token: give existingSecret or value, not both" }}
{{- end }}
{{- if include "inferd.hf.enabled" . }}
{{- if and $hf.offline (eq $hf.cache.type "emptyDir") }}
{{- fail "huggingface.offline needs a cache that already holds the models: an emptyDir cache starts empty (use cache.type pvc or hostPath)" }}
{{- end }}
{{- if and (include "inferd.hf.singleAttachCache" .) (or .Values.autoscaling.enabled (gt (int .Values.replicaCount) 1)) }}
{{- fail (printf "huggingface.cache.pvc.accessModes %v: the chart-created cache is shared by every pod, so several pods (replicaCount > 1 or autoscaling) need ReadWriteMany; or use an emptyDir cache per pod" $hf.cache.pvc.accessModes) }}
{{- end }}
{{- $mp := printf "%s/" ($hf.cache.mountPath | trimSuffix "/") }}
{{- $taken := list "/tmp/" "/etc/inferd/" }}
{{- if ne .Values.modelStorage.type "none" }}
{{- $taken = append $taken (printf "%s/" (.Values.modelStorage.mountPath | trimSuffix "/")) }}
{{- end }}
{{- range $taken }}
{{- if or (hasPrefix . $mp) (hasPrefix $mp .) }}
{{- fail (printf "huggingface.cache.mountPath %s overlaps %s, which the chart mounts too" $hf.cache.mountPath (trimSuffix "/" .)) }}
{{- end }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The startup probe's settings: probes.startup, with failureThreshold raised
by huggingface.downloadAllowanceSeconds (in periods, rounded up) when
models are downloaded from the Hub (not offline).
*/}}
{{- define "inferd.startupProbe" -}}
{{- $p := deepCopy .Values.probes.startup }}
{{- $hf := .Values.huggingface }}
{{- if and (include "inferd.hf.enabled" .) (not $hf.offline) }}
{{- $period := int $p.periodSeconds }}
{{- $extra := div (add (int $hf.downloadAllowanceSeconds) (sub $period 1)) $period }}
{{- $_ := set $p "failureThreshold" (add (int $p.failureThreshold) $extra) }}
{{- end }}
{{- toYaml $p }}
{{- end }}

{{/* Seconds the startup probe allows (NOTES). */}}
{{- define "inferd.startupSeconds" -}}
{{- $p := include "inferd.startupProbe" . | fromYaml }}
{{- mul (int $p.periodSeconds) (int $p.failureThreshold) }}
{{- end }}
