#!/usr/bin/env bash
# Runs a Kafka main class with the distribution's conventions (the apache/kafka image's bin/ scripts are
# not on Maven Central, only the jars): KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_OPTS, LOG_DIR.
set -euo pipefail
class="$1"; shift
exec java ${KAFKA_HEAP_OPTS:--Xmx256m} \
  ${KAFKA_JVM_PERFORMANCE_OPTS:--server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true} \
  -Dkafka.logs.dir="${LOG_DIR:-/tmp/kafka-logs}" -Dlog4j2.configurationFile=/opt/kafka/config/log4j2.properties \
  ${KAFKA_OPTS:-} -cp '/opt/kafka/libs/*' "$class" "$@"
