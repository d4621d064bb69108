{{/* Names ---------------------------------------------------------------------------------------- */}}

{{- define "sparkwire.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-sparkwire, or the release name when it already contains the chart name. Kept to 40
characters so `<fullname>-aggregator-driver` and Spark's derived names stay within 63. */}}
{{- define "sparkwire.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "sparkwire.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels: include "sparkwire.labels" (dict "ctx" $ "component" "gateway") */}}
{{- define "sparkwire.labels" -}}
helm.sh/chart: {{ include "sparkwire.chart" .ctx }}
{{ include "sparkwire.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: sparkwire
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "sparkwire.selectorLabels" -}}
app.kubernetes.io/name: sparkwire
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "sparkwire.gateway.fullname" -}}{{ include "sparkwire.fullname" . }}-gateway{{- end -}}
{{- define "sparkwire.redis.fullname" -}}{{ include "sparkwire.fullname" . }}-redis{{- end -}}
{{- define "sparkwire.aggregator.fullname" -}}{{ include "sparkwire.fullname" . }}-aggregator{{- end -}}
{{- define "sparkwire.kafka.fullname" -}}{{ include "sparkwire.fullname" . }}-kafka{{- end -}}

{{/* Images ---------------------------------------------------------------------------------------- */}}

{{- define "sparkwire.gateway.image" -}}
{{- printf "%s:%s" .Values.gateway.image.repository (.Values.gateway.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{- define "sparkwire.aggregator.image" -}}
{{- printf "%s:%s" .Values.aggregator.image.repository (.Values.aggregator.image.tag | default .Chart.AppVersion | toString) -}}
{{- end -}}

{{- define "sparkwire.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{- range . }}
  - name: {{ . | quote }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Redis ----------------------------------------------------------------------------------------- */}}

{{/* Secret holding the in-chart Redis password. */}}
{{- define "sparkwire.redis.secretName" -}}
{{- .Values.redis.auth.existingSecret | default (include "sparkwire.redis.fullname" .) -}}
{{- end -}}

{{- define "sparkwire.redis.passwordKey" -}}
{{- if .Values.redis.auth.existingSecret -}}{{ .Values.redis.auth.existingSecretPasswordKey }}{{- else -}}redis-password{{- end -}}
{{- end -}}

{{/* Secret holding the URL of an external Redis. */}}
{{- define "sparkwire.redis.urlSecretName" -}}
{{- .Values.redis.external.existingSecret | default (printf "%s-external" (include "sparkwire.redis.fullname" .)) -}}
{{- end -}}

{{- define "sparkwire.redis.urlSecretKey" -}}
{{- if .Values.redis.external.existingSecret -}}{{ .Values.redis.external.existingSecretKey }}{{- else -}}redis-url{{- end -}}
{{- end -}}

{{/* "true" when the chart runs its own Redis replicated (1 primary + replicas, a Sentinel in every pod). */}}
{{- define "sparkwire.redis.replicated" -}}
{{- if and .Values.redis.enabled .Values.redis.replication.enabled -}}true{{- end -}}
{{- end -}}

{{- define "sparkwire.redis.headlessName" -}}{{ include "sparkwire.redis.fullname" . }}-headless{{- end -}}
{{- define "sparkwire.redis.sentinelName" -}}{{ include "sparkwire.redis.fullname" . }}-sentinel{{- end -}}

{{/* Pods of the Redis StatefulSet: 1, or the primary and its replicas. */}}
{{- define "sparkwire.redis.pods" -}}
{{- if include "sparkwire.redis.replicated" . -}}{{ add1 (int .Values.redis.replication.replicas) }}{{- else -}}1{{- end -}}
{{- end -}}

{{/* The stable DNS name of every Redis pod (through the headless Service), space-separated, in ordinal
order: what they announce (replica-announce-ip, sentinel announce-ip) and what the start scripts ask. */}}
{{- define "sparkwire.redis.nodes" -}}
{{- $nodes := list -}}
{{- range $i := until (int (include "sparkwire.redis.pods" .)) -}}
{{- $nodes = append $nodes (printf "%s-%d.%s.%s.svc" (include "sparkwire.redis.fullname" $) $i (include "sparkwire.redis.headlessName" $) $.Release.Namespace) -}}
{{- end -}}
{{- join " " $nodes -}}
{{- end -}}

{{/* Environment both start scripts read (files/redis/): who this pod is, every data pod's address, the
master name. */}}
{{- define "sparkwire.redis.scriptEnv" -}}
- name: POD_NAME
  valueFrom:
    fieldRef:
      fieldPath: metadata.name
- name: REDIS_NODES
  value: {{ include "sparkwire.redis.nodes" . | quote }}
- name: MASTER_NAME
  value: {{ .Values.redis.replication.masterName | quote }}
{{- end -}}

{{/* Where a client finds Redis, without the password: the single Redis's Service, or the Sentinels' Service
and the name they monitor the primary under (sparkwire.replaylog.redis_url's redis+sentinel:// form). */}}
{{- define "sparkwire.redis.address" -}}
{{- if include "sparkwire.redis.replicated" . -}}
{{- printf "%s.%s.svc:26379/%s/0" (include "sparkwire.redis.sentinelName" .) .Release.Namespace .Values.redis.replication.masterName -}}
{{- else -}}
{{- printf "%s.%s.svc:6379/0" (include "sparkwire.redis.fullname" .) .Release.Namespace -}}
{{- end -}}
{{- end -}}

{{/* How many replicas a Spark job waits for (Redis WAIT) before it publishes a batch: the replicated in-chart
Redis 1 (every primary has min-replicas-to-write 1 too), the single one none, an external one what
redis.external.replicasToAcknowledge says. */}}
{{- define "sparkwire.redis.replicasEnv" -}}
- name: SPARKWIRE_REDIS_REPLICAS
  value: {{ ternary (ternary 1 0 (eq (include "sparkwire.redis.replicated" .) "true")) .Values.redis.external.replicasToAcknowledge .Values.redis.enabled | quote }}
{{- end -}}

{{/* Environment that gives a container SPARKWIRE_REDIS_URL. For the in-chart Redis the password
comes from the Secret as REDIS_PASSWORD, listed first so that Kubernetes expands $(REDIS_PASSWORD)
in the URL (replicated: a redis+sentinel:// URL of the Sentinels' Service, whose password is the data
nodes'; the Sentinels take none); an external Redis's whole URL comes from a Secret. */}}
{{- define "sparkwire.redis.env" -}}
{{- if .Values.redis.enabled }}
{{- $scheme := ternary "redis+sentinel" "redis" (eq (include "sparkwire.redis.replicated" .) "true") -}}
{{- if .Values.redis.auth.enabled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "sparkwire.redis.secretName" . }}
      key: {{ include "sparkwire.redis.passwordKey" . }}
- name: SPARKWIRE_REDIS_URL
  value: {{ printf "%s://:$(REDIS_PASSWORD)@%s" $scheme (include "sparkwire.redis.address" .) | quote }}
{{- else }}
- name: SPARKWIRE_REDIS_URL
  value: {{ printf "%s://%s" $scheme (include "sparkwire.redis.address" .) | quote }}
{{- end }}
{{- else }}
- name: SPARKWIRE_REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "sparkwire.redis.urlSecretName" . }}
      key: {{ include "sparkwire.redis.urlSecretKey" . }}
{{- end }}
{{- end -}}

{{/* Kafka ----------------------------------------------------------------------------------------- */}}

{{- define "sparkwire.kafka.bootstrapServers" -}}
{{- if .Values.kafka.deploy.enabled -}}
{{- printf "%s.%s.svc:9092" (include "sparkwire.kafka.fullname" .) .Release.Namespace -}}
{{- else -}}
{{- .Values.kafka.bootstrapServers -}}
{{- end -}}
{{- end -}}

{{/* Brokers of the in-chart Kafka. */}}
{{- define "sparkwire.kafka.replicas" -}}{{ int .Values.kafka.deploy.replicas }}{{- end -}}
{{- define "sparkwire.kafka.headlessName" -}}{{ include "sparkwire.kafka.fullname" . }}-headless{{- end -}}

{{/* Replication factor of the in-chart Kafka's topics (internal ones and the chart's): every broker. */}}
{{- define "sparkwire.kafka.replicationFactor" -}}{{ include "sparkwire.kafka.replicas" . }}{{- end -}}

{{/* min.insync.replicas: 2 with 3 or more brokers (an acks=all write survives losing one), else 1. */}}
{{- define "sparkwire.kafka.minInsyncReplicas" -}}{{ ternary 2 1 (ge (int .Values.kafka.deploy.replicas) 3) }}{{- end -}}

{{/* controller.quorum.voters of a multi-broker Kafka: <ordinal>@<pod's stable DNS name>:9093, every pod. */}}
{{- define "sparkwire.kafka.quorumVoters" -}}
{{- $voters := list -}}
{{- range $i := until (int .Values.kafka.deploy.replicas) -}}
{{- $voters = append $voters (printf "%d@%s-%d.%s.%s.svc:9093" $i (include "sparkwire.kafka.fullname" $) $i (include "sparkwire.kafka.headlessName" $) $.Release.Namespace) -}}
{{- end -}}
{{- join "," $voters -}}
{{- end -}}

{{/* The cluster id every broker of a multi-broker Kafka formats its storage with: the same on every pod and
every render (from the namespace and release), 22 base64url characters (16 bytes: the last one 'A'). */}}
{{- define "sparkwire.kafka.clusterId" -}}
{{- printf "%s/%s/sparkwire-kafka" .Release.Namespace .Release.Name | sha256sum | trunc 21 -}}A
{{- end -}}

{{/* Aggregator ------------------------------------------------------------------------------------ */}}

{{- define "sparkwire.aggregator.serviceAccountName" -}}
{{- if .Values.aggregator.serviceAccount.create -}}
{{- .Values.aggregator.serviceAccount.name | default (include "sparkwire.aggregator.fullname" .) -}}
{{- else -}}
{{- .Values.aggregator.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{- define "sparkwire.aggregator.checkpointClaim" -}}
{{- .Values.aggregator.checkpoint.existingClaim | default (printf "%s-checkpoint" (include "sparkwire.aggregator.fullname" .)) -}}
{{- end -}}

{{/* The aggregator driver's environment: every option of `sparkwire aggregate` the chart sets. */}}
{{- define "sparkwire.aggregator.env" -}}
{{- $a := .Values.aggregator -}}
{{- $c := $a.config -}}
- name: SPARKWIRE_BOOTSTRAP_SERVERS
  value: {{ include "sparkwire.kafka.bootstrapServers" . | quote }}
- name: SPARKWIRE_TOPIC
  value: {{ .Values.kafka.topics.raw | quote }}
- name: SPARKWIRE_DEAD_LETTER_TOPIC
  value: {{ .Values.kafka.topics.deadLetter | quote }}
- name: SPARKWIRE_STARTING_OFFSETS
  value: {{ $c.startingOffsets | quote }}
- name: SPARKWIRE_MAX_OFFSETS_PER_TRIGGER
  value: {{ $c.maxOffsetsPerTrigger | quote }}
{{ include "sparkwire.redis.env" . | trim }}
{{ include "sparkwire.redis.replicasEnv" . }}
- name: SPARKWIRE_STREAM
  value: {{ .Values.stream | quote }}
- name: SPARKWIRE_RETENTION
  value: {{ $c.retention | quote }}
- name: SPARKWIRE_CHUNK_SIZE
  value: {{ $c.chunkSize | quote }}
- name: SPARKWIRE_CHECKPOINT
  value: {{ $a.checkpoint.mountPath | quote }}
- name: SPARKWIRE_WINDOW_MS
  value: {{ $c.windowMs | quote }}
- name: SPARKWIRE_WATERMARK_DELAY_MS
  value: {{ $c.watermarkDelayMs | quote }}
- name: SPARKWIRE_TRIGGER_MS
  value: {{ $c.triggerMs | quote }}
- name: SPARKWIRE_DEAD_LETTER_TRIGGER_MS
  value: {{ $c.deadLetterTriggerMs | quote }}
- name: SPARKWIRE_SHUFFLE_PARTITIONS
  value: {{ $c.shufflePartitions | quote }}
# Empty: the master comes from spark-submit (k8s://...), not the command's local[2].
- name: SPARKWIRE_MASTER
  value: ""
- name: SPARKWIRE_METRICS_PORT
  value: {{ $c.metricsPort | quote }}
- name: SPARKWIRE_LOG_LEVEL
  value: {{ $c.logLevel | quote }}
{{- with $a.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Labels Spark (through the operator) puts on the driver pod: what the metrics Service selects. */}}
{{- define "sparkwire.aggregator.driverSelector" -}}
{{- include "sparkwire.spark.driverSelector" (include "sparkwire.aggregator.fullname" .) -}}
{{- end -}}

{{/* Pods of this release's Spark application: driver and executors. */}}
{{- define "sparkwire.aggregator.podSelector" -}}
{{- include "sparkwire.spark.podSelector" (include "sparkwire.aggregator.fullname" .) -}}
{{- end -}}

{{/* Spark applications: the aggregator's and every job's (templates/jobs/) ---------------------------- */}}

{{/* The driver pod of the SparkApplication named by the argument, whichever attempt is running. */}}
{{- define "sparkwire.spark.driverSelector" -}}
spark-role: driver
sparkoperator.k8s.io/app-name: {{ . }}
{{- end -}}

{{/* Every pod (driver and executors) of the SparkApplication named by the argument. */}}
{{- define "sparkwire.spark.podSelector" -}}
sparkoperator.k8s.io/app-name: {{ . }}
{{- end -}}

{{/* The ServiceAccount (with its Role) every Spark driver of the release runs as — the aggregator's and the
jobs' — exists when either runs. */}}
{{- define "sparkwire.spark.driversRun" -}}
{{- if or .Values.aggregator.enabled .Values.jobs -}}true{{- end -}}
{{- end -}}

{{/* The NetworkPolicies of a SparkApplication's pods. Takes (dict "ctx" $ "name" <app> "labels" <rendered>
"metricsPort" <port>). */}}
{{- define "sparkwire.spark.networkPolicies" -}}
{{- $ctx := .ctx -}}
{{- $spark := include "sparkwire.spark.podSelector" .name -}}
# Driver and executors: they talk to each other on Spark's ports, and read and write Kafka.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ .name }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- .labels | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- $spark | nindent 6 }}
  policyTypes: ["Ingress", "Egress"]
  ingress:
    - from:
        - podSelector:
            matchLabels:
              {{- $spark | nindent 14 }}
  egress:
    - to:
        - podSelector:
            matchLabels:
              {{- $spark | nindent 14 }}
    {{- include "sparkwire.netpol.dnsEgress" $ctx | nindent 4 }}
    {{- include "sparkwire.netpol.kafkaEgress" $ctx | nindent 4 }}
---
# The driver alone: Prometheus scrapes it; it commits to Redis and manages executors through the API server.
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata:
  name: {{ .name }}-driver
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- .labels | nindent 4 }}
spec:
  podSelector:
    matchLabels:
      {{- include "sparkwire.spark.driverSelector" .name | nindent 6 }}
  policyTypes: ["Ingress", "Egress"]
  ingress:
    - ports:
        - port: {{ .metricsPort }}
          protocol: TCP
      {{- with $ctx.Values.networkPolicy.metricsFrom }}
      from:
        {{- toYaml . | nindent 8 }}
      {{- end }}
  egress:
    {{- include "sparkwire.netpol.redisEgress" $ctx | nindent 4 }}
    - ports:
        {{- range $ctx.Values.networkPolicy.apiServerPorts }}
        - port: {{ . }}
          protocol: TCP
        {{- end }}
{{- end -}}

{{/* NetworkPolicy pieces -------------------------------------------------------------------------- */}}

{{/* Egress to DNS, wherever the resolver runs (kube-dns, NodeLocal DNSCache). */}}
{{- define "sparkwire.netpol.dnsEgress" -}}
- ports:
    - port: 53
      protocol: UDP
    - port: 53
      protocol: TCP
{{- end -}}

{{/* Egress to Redis: the in-chart pods (replicated: their Sentinels too), or any address on the external
Redis ports. */}}
{{- define "sparkwire.netpol.redisEgress" -}}
{{- if .Values.redis.enabled -}}
- to:
    - podSelector:
        matchLabels:
          {{- include "sparkwire.selectorLabels" (dict "ctx" . "component" "redis") | nindent 10 }}
  ports:
    - port: 6379
      protocol: TCP
    {{- if include "sparkwire.redis.replicated" . }}
    - port: 26379
      protocol: TCP
    {{- end }}
{{- else -}}
- ports:
    {{- range .Values.networkPolicy.externalRedisPorts }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end -}}
{{- end -}}

{{/* Egress to Kafka: the in-chart broker, or any address on the external Kafka ports. */}}
{{- define "sparkwire.netpol.kafkaEgress" -}}
{{- if .Values.kafka.deploy.enabled -}}
- to:
    - podSelector:
        matchLabels:
          {{- include "sparkwire.selectorLabels" (dict "ctx" . "component" "kafka") | nindent 10 }}
  ports:
    - port: 9092
      protocol: TCP
{{- else -}}
- ports:
    {{- range .Values.networkPolicy.externalKafkaPorts }}
    - port: {{ . }}
      protocol: TCP
    {{- end }}
{{- end -}}
{{- end -}}

{{/* Gateway auth ---------------------------------------------------------------------------------- */}}

{{/* Tokens verified with an identity provider's keys (`auth.jwks.url` or `auth.publicKey.existingSecret`)
rather than a shared secret: "true" or empty. */}}
{{- define "sparkwire.gateway.authIdp" -}}
{{- $a := .Values.gateway.auth -}}
{{- if and $a.enabled (or $a.jwks.url $a.publicKey.existingSecret) }}true{{ end -}}
{{- end -}}

{{/* Tokens verified with a shared secret (the chart's or `auth.existingSecret`): "true" or empty. */}}
{{- define "sparkwire.gateway.authHmac" -}}
{{- if and .Values.gateway.auth.enabled (not (include "sparkwire.gateway.authIdp" .)) }}true{{ end -}}
{{- end -}}

{{/* The Secret the gateways read the token secret from: `auth.existingSecret`, or the chart's. */}}
{{- define "sparkwire.gateway.authSecretName" -}}
{{- .Values.gateway.auth.existingSecret | default (printf "%s-auth" (include "sparkwire.gateway.fullname" .)) -}}
{{- end -}}

{{- define "sparkwire.gateway.authSecretKey" -}}
{{- if .Values.gateway.auth.existingSecret -}}{{ .Values.gateway.auth.existingSecretKey }}{{- else -}}auth-secret{{- end -}}
{{- end -}}

{{/* The token secret of the chart's Secret, base64: `auth.secret`, else the live Secret's (an upgrade
keeps it, so tokens stay valid), else a new random one. Decided once per render and remembered, so the
Secret and the Deployment's checksum annotation see the same value. */}}
{{- define "sparkwire.gateway.authSecretData" -}}
{{- $state := .Values.gateway.auth -}}
{{- if not (hasKey $state "__rendered") -}}
{{- $data := "" -}}
{{- if $state.secret -}}
{{- $data = $state.secret | b64enc -}}
{{- else -}}
{{- $live := lookup "v1" "Secret" .Release.Namespace (include "sparkwire.gateway.authSecretName" .) -}}
{{- if and $live $live.data (hasKey $live.data "auth-secret") -}}
{{- $data = index $live.data "auth-secret" -}}
{{- else -}}
{{- $data = randAlphaNum 48 | b64enc -}}
{{- end -}}
{{- end -}}
{{- $_ := set $state "__rendered" $data -}}
{{- end -}}
{{- index $state "__rendered" -}}
{{- end -}}

{{/* Origins the gateways allow: `config.allowedOrigins`, else the Ingress hosts' own origins (the page
the gateways serve there), else none (any origin). */}}
{{- define "sparkwire.gateway.allowedOrigins" -}}
{{- $gw := .Values.gateway -}}
{{- $origins := $gw.config.allowedOrigins -}}
{{- if and (not $origins) $gw.ingress.enabled -}}
{{- $tlsHosts := list -}}
{{- range $gw.ingress.tls -}}
{{- $tlsHosts = concat $tlsHosts (.hosts | default list) -}}
{{- end -}}
{{- range $gw.ingress.hosts -}}
{{- $origins = append $origins (printf "%s://%s" (ternary "https" "http" (has . $tlsHosts)) .) -}}
{{- end -}}
{{- end -}}
{{- join "," $origins -}}
{{- end -}}

{{/* Jobs: users' own deliveries (templates/jobs/) ------------------------------------------------------ */}}

{{/* `<fullname>-job-<name>`: the SparkApplication, and the prefix of the job's other objects. */}}
{{- define "sparkwire.job.fullname" -}}
{{- printf "%s-job-%s" (include "sparkwire.fullname" .ctx) .job.name -}}
{{- end -}}

{{/* Labels of a job's objects and pods: component `job` (so no aggregator selector matches them) plus the
job's name. Take (dict "ctx" $ "job" <entry>). */}}
{{- define "sparkwire.job.labels" -}}
{{ include "sparkwire.labels" (dict "ctx" .ctx "component" "job") }}
sparkwire.io/job: {{ .job.name }}
{{- end -}}

{{- define "sparkwire.job.podLabels" -}}
{{ include "sparkwire.selectorLabels" (dict "ctx" .ctx "component" "job") }}
sparkwire.io/job: {{ .job.name }}
{{- end -}}

{{/* A job entry with every default filled in (YAML; read it with fromYaml): image, resources, checkpoint
and settings default to the aggregator's, except the checkpoint claim (each job has its own). */}}
{{- define "sparkwire.job.resolved" -}}
{{- $ctx := .ctx -}}
{{- $job := .job -}}
{{- $a := $ctx.Values.aggregator -}}
{{- $app := include "sparkwire.job.fullname" . -}}
{{- $image := $job.image | default dict -}}
{{- $tag := $image.tag | default (ternary "" $a.image.tag (hasKey $image "repository")) | default $ctx.Chart.AppVersion -}}
{{- $out := dict "name" $job.name "app" $app "stream" $job.stream -}}
{{- $_ := set $out "image" (printf "%s:%s" ($image.repository | default $a.image.repository) ($tag | toString)) -}}
{{- $_ := set $out "pullPolicy" ($image.pullPolicy | default $a.image.pullPolicy) -}}
{{- $arguments := $job.arguments | default (list "run") -}}
{{- if $job.module -}}
{{- $_ := set $out "mainApplicationFile" "local:///opt/sparkwire/run_module.py" -}}
{{- $_ := set $out "arguments" (prepend $arguments $job.module) -}}
{{- else -}}
{{- $_ := set $out "mainApplicationFile" $job.mainApplicationFile -}}
{{- $_ := set $out "arguments" $arguments -}}
{{- end -}}
{{- range $role := list "driver" "executor" -}}
{{- $own := index $job $role | default dict -}}
{{- $keys := list "cores" "coreRequest" "coreLimit" "memory" "memoryOverhead" -}}
{{- if eq $role "executor" }}{{ $keys = append $keys "instances" }}{{ else }}{{ $keys = append $keys "javaOptions" }}{{ end -}}
{{- $resolved := dict -}}
{{- range $keys -}}
{{- $_ := set $resolved . (ternary (index $own .) (index (index $a $role) .) (hasKey $own .)) -}}
{{- end -}}
{{- $_ := set $out $role $resolved -}}
{{- end -}}
{{- $own := $job.checkpoint | default dict -}}
{{- $cp := dict "mountPath" $a.checkpoint.mountPath "existingClaim" ($own.existingClaim | default "") -}}
{{- range list "size" "storageClass" "accessMode" "keep" -}}
{{- $_ := set $cp . (ternary (index $own .) (index $a.checkpoint .) (hasKey $own .)) -}}
{{- end -}}
{{- $_ := set $cp "claim" ($cp.existingClaim | default (printf "%s-checkpoint" $app)) -}}
{{- $_ := set $out "checkpoint" $cp -}}
{{- range list "shufflePartitions" "metricsPort" "logLevel" -}}
{{- $_ := set $out . (ternary (index $job .) (index $a.config .) (hasKey $job .)) -}}
{{- end -}}
{{- $_ := set $out "env" ($job.env | default list) -}}
{{- $_ := set $out "sparkConf" ($job.sparkConf | default dict) -}}
{{- $_ := set $out "kafkaTopic" ($job.kafkaTopic | default "") -}}
{{- toYaml $out -}}
{{- end -}}

{{/* The job driver's environment: where it runs, through the placement options `sparkwire.spark.main` reads
(they override the job file's own settings), then the entry's `env`. Takes (dict "ctx" $ "job" <resolved>). */}}
{{- define "sparkwire.job.env" -}}
{{- $j := .job -}}
- name: SPARKWIRE_BOOTSTRAP_SERVERS
  value: {{ include "sparkwire.kafka.bootstrapServers" .ctx | quote }}
{{ include "sparkwire.redis.env" .ctx | trim }}
{{ include "sparkwire.redis.replicasEnv" .ctx }}
- name: SPARKWIRE_STREAM
  value: {{ $j.stream | quote }}
- name: SPARKWIRE_CHECKPOINT
  value: {{ $j.checkpoint.mountPath | quote }}
- name: SPARKWIRE_SHUFFLE_PARTITIONS
  value: {{ $j.shufflePartitions | quote }}
# Empty: the master comes from spark-submit (k8s://...), not the command's local[2].
- name: SPARKWIRE_MASTER
  value: ""
- name: SPARKWIRE_METRICS_PORT
  value: {{ $j.metricsPort | quote }}
- name: SPARKWIRE_LOG_LEVEL
  value: {{ $j.logLevel | quote }}
{{- with $j.env }}
{{ toYaml . }}
{{- end }}
{{- end -}}
