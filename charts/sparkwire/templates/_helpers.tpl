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

{{/* Environment that gives a container SPARKWIRE_REDIS_URL. For the in-chart Redis the password
comes from the Secret as REDIS_PASSWORD, listed first so that Kubernetes expands $(REDIS_PASSWORD)
in the URL; an external Redis's whole URL comes from a Secret. */}}
{{- define "sparkwire.redis.env" -}}
{{- if .Values.redis.enabled }}
{{- if .Values.redis.auth.enabled }}
- name: REDIS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "sparkwire.redis.secretName" . }}
      key: {{ include "sparkwire.redis.passwordKey" . }}
- name: SPARKWIRE_REDIS_URL
  value: {{ printf "redis://:$(REDIS_PASSWORD)@%s.%s.svc:6379/0" (include "sparkwire.redis.fullname" .) .Release.Namespace | quote }}
{{- else }}
- name: SPARKWIRE_REDIS_URL
  value: {{ printf "redis://%s.%s.svc:6379/0" (include "sparkwire.redis.fullname" .) .Release.Namespace | quote }}
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

{{/* Labels Spark (through the operator) puts on the driver pod: what the metrics Service selects. */}}
{{- define "sparkwire.aggregator.driverSelector" -}}
spark-role: driver
sparkoperator.k8s.io/app-name: {{ include "sparkwire.aggregator.fullname" . }}
{{- end -}}

{{/* Pods of this release's Spark application: driver and executors. */}}
{{- define "sparkwire.aggregator.podSelector" -}}
sparkoperator.k8s.io/app-name: {{ include "sparkwire.aggregator.fullname" . }}
{{- end -}}

{{/* The checkpoint plus writable scratch directories (the root filesystem is read-only): /tmp
(Spark's entrypoint writes its java options there) and Spark's working directory. */}}
{{- define "sparkwire.aggregator.volumeMounts" -}}
- name: checkpoint
  mountPath: {{ .Values.aggregator.checkpoint.mountPath }}
- name: tmp
  mountPath: /tmp
- name: work-dir
  mountPath: /opt/spark/work-dir
{{- end -}}

{{- define "sparkwire.aggregator.volumes" -}}
- name: checkpoint
  persistentVolumeClaim:
    claimName: {{ include "sparkwire.aggregator.checkpointClaim" . }}
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
- name: work-dir
  emptyDir:
    sizeLimit: 1Gi
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

{{/* Egress to Redis: the in-chart pod, or any address on the external Redis ports. */}}
{{- define "sparkwire.netpol.redisEgress" -}}
{{- if .Values.redis.enabled -}}
- to:
    - podSelector:
        matchLabels:
          {{- include "sparkwire.selectorLabels" (dict "ctx" . "component" "redis") | nindent 10 }}
  ports:
    - port: 6379
      protocol: TCP
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
