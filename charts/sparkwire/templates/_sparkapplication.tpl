{{/* The SparkApplication: the aggregator's (templates/aggregator/sparkapplication.yaml) and every job's
(templates/jobs/sparkapplication.yaml), one structure for both, with the volumes of its driver and executors.
The selectors, the drivers' ServiceAccount and the NetworkPolicies of Spark pods are in _helpers.tpl. */}}

{{/* A SparkApplication: the aggregator's or a job's, one structure for both. Takes a dict:
  ctx            the root context
  name           the SparkApplication's name
  labels         its metadata labels (rendered)
  podLabels      the labels of its driver and executor pods (rendered)
  image, pullPolicy, mainApplicationFile, arguments (list, may be empty), sparkConf (map)
  driver         {cores, coreRequest, coreLimit, memory, memoryOverhead, javaOptions, labels, annotations}
  executor       the same without javaOptions, plus instances
  env            the driver container's env (a rendered EnvVar list)
  metricsPort    the driver's Prometheus port
  mountPath, claim, accessMode   the checkpoint volume
Spark version, restart policy, node selector, tolerations, security contexts and the ServiceAccount are the
aggregator's for every application. */}}
{{- define "sparkwire.spark.application" -}}
{{- $ctx := .ctx -}}
{{- $a := $ctx.Values.aggregator -}}
{{- $volumes := include "sparkwire.spark.volumes" (dict "claim" .claim) -}}
{{- $mounts := include "sparkwire.spark.volumeMounts" (dict "mountPath" .mountPath) -}}
apiVersion: sparkoperator.k8s.io/v1beta2
kind: SparkApplication
metadata:
  name: {{ .name }}
  namespace: {{ $ctx.Release.Namespace }}
  labels:
    {{- .labels | nindent 4 }}
spec:
  type: Python
  pythonVersion: "3"
  mode: cluster
  sparkVersion: {{ $a.sparkVersion | quote }}
  image: {{ .image | quote }}
  imagePullPolicy: {{ .pullPolicy }}
  {{- with $ctx.Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  # The Kafka connector jars are on the image's classpath, the master is left to spark-submit
  # (SPARKWIRE_MASTER is empty), options come from SPARKWIRE_* variables.
  mainApplicationFile: {{ .mainApplicationFile | quote }}
  {{- with .arguments }}
  arguments:
    {{- range . }}
    - {{ . | toString | quote }}
    {{- end }}
  {{- end }}
  {{- /* Spark 4.2's spark-submit would create a NetworkPolicy of its own for the executors
  (NetworkPolicyFeatureStep, SPARK-55653), which the operator's service account may not patch: the
  chart's own policies (networkPolicy.*) govern these pods. A sparkConf of the values replaces it. */}}
  {{- $sparkConf := dict "spark.kubernetes.driver.pod.excludedFeatureSteps" "org.apache.spark.deploy.k8s.features.NetworkPolicyFeatureStep" }}
  {{- /* set, not merge: merge would keep the default under an empty value ("" re-enables the step) */}}
  {{- range $key, $value := .sparkConf }}{{ $_ := set $sparkConf $key $value }}{{ end }}
  sparkConf:
    {{- range $key, $value := $sparkConf }}
    {{ $key | quote }}: {{ $value | toString | quote }}
    {{- end }}
  # A streaming query never finishes: the job exits non-zero when a query stops, and Always resubmits
  # after any end (a PySpark driver that dies can still be reported COMPLETED, which OnFailure would not
  # restart). The new driver resumes from the checkpoint.
  restartPolicy:
    type: Always
    onFailureRetryInterval: {{ $a.restartPolicy.onFailureRetryInterval }}
    onSubmissionFailureRetryInterval: {{ $a.restartPolicy.onSubmissionFailureRetryInterval }}
  {{- with $a.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  # Pod templates (Spark >= 3) carry env, volumes and security contexts, so the operator's mutating
  # webhook is not needed: the container names are the ones the operator tells Spark to use.
  driver:
    cores: {{ .driver.cores }}
    {{- with .driver.coreRequest }}
    coreRequest: {{ . | quote }}
    {{- end }}
    coreLimit: {{ .driver.coreLimit | quote }}
    memory: {{ .driver.memory | quote }}
    memoryOverhead: {{ .driver.memoryOverhead | quote }}
    {{- with .driver.javaOptions }}
    javaOptions: {{ . | quote }}
    {{- end }}
    serviceAccount: {{ include "sparkwire.aggregator.serviceAccountName" $ctx }}
    labels:
      {{- .podLabels | nindent 6 }}
      {{- with .driver.labels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with .driver.annotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    template:
      metadata:
        labels:
          {{- .podLabels | nindent 10 }}
      spec:
        securityContext:
          {{- toYaml $a.podSecurityContext | nindent 10 }}
        {{- with $a.tolerations }}
        tolerations:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        containers:
          - name: spark-kubernetes-driver
            ports:
              - name: metrics
                containerPort: {{ .metricsPort }}
                protocol: TCP
            env:
              {{- .env | trim | nindent 14 }}
            securityContext:
              {{- toYaml $a.securityContext | nindent 14 }}
            volumeMounts:
              {{- $mounts | nindent 14 }}
        volumes:
          {{- $volumes | nindent 10 }}
  executor:
    instances: {{ .executor.instances }}
    cores: {{ .executor.cores }}
    {{- with .executor.coreRequest }}
    coreRequest: {{ . | quote }}
    {{- end }}
    coreLimit: {{ .executor.coreLimit | quote }}
    memory: {{ .executor.memory | quote }}
    memoryOverhead: {{ .executor.memoryOverhead | quote }}
    deleteOnTermination: true
    labels:
      {{- .podLabels | nindent 6 }}
      {{- with .executor.labels }}
      {{- toYaml . | nindent 6 }}
      {{- end }}
    {{- with .executor.annotations }}
    annotations:
      {{- toYaml . | nindent 6 }}
    {{- end }}
    template:
      metadata:
        labels:
          {{- .podLabels | nindent 10 }}
      spec:
        securityContext:
          {{- toYaml $a.podSecurityContext | nindent 10 }}
        {{- with $a.tolerations }}
        tolerations:
          {{- toYaml . | nindent 10 }}
        {{- end }}
        {{- if eq .accessMode "ReadWriteOnce" }}
        # Executors write state-store files into the checkpoint: with a ReadWriteOnce volume they must
        # run on the node that mounts it, their own driver's.
        affinity:
          podAffinity:
            requiredDuringSchedulingIgnoredDuringExecution:
              - topologyKey: kubernetes.io/hostname
                labelSelector:
                  matchLabels:
                    {{- include "sparkwire.spark.driverSelector" .name | nindent 20 }}
        {{- end }}
        containers:
          - name: spark-kubernetes-executor
            securityContext:
              {{- toYaml $a.securityContext | nindent 14 }}
            volumeMounts:
              {{- $mounts | nindent 14 }}
        volumes:
          {{- $volumes | nindent 10 }}
{{- end -}}

{{/* The checkpoint plus writable scratch directories (the root filesystem is read-only): /tmp
(Spark's entrypoint writes its java options there) and Spark's working directory.
Takes (dict "mountPath" ...). */}}
{{- define "sparkwire.spark.volumeMounts" -}}
- name: checkpoint
  mountPath: {{ .mountPath }}
- name: tmp
  mountPath: /tmp
- name: work-dir
  mountPath: /opt/spark/work-dir
{{- end -}}

{{/* Takes (dict "claim" ...). */}}
{{- define "sparkwire.spark.volumes" -}}
- name: checkpoint
  persistentVolumeClaim:
    claimName: {{ .claim }}
- name: tmp
  emptyDir:
    sizeLimit: 1Gi
- name: work-dir
  emptyDir:
    sizeLimit: 1Gi
{{- end -}}
