# Stand-in for apache/kafka:4.1.1 as the chart runs it (charts/sparkwire/templates/kafka: the broker and
# the topics Job call /opt/kafka/bin/kafka-storage.sh, kafka-server-start.sh and kafka-topics.sh as uid
# 1000, and probe with bash's /dev/tcp), on the offline bases: Kafka's jars from Maven Central by the same
# pom the local broker uses (infra/maven/kafka/pom.xml), the JRE of the Spark stand-in, and the bin/
# scripts as thin wrappers of kafka-run-class.sh (the distribution's scripts are not on any registry).
# Context (build-images.sh): this folder's kafka/ plus pom.xml and log4j2.properties.
ARG MAVEN_IMAGE=sparkwire-offline/maven:3.9
ARG SPARK_IMAGE=sparkwire-offline/spark:4.2.0
ARG BASE=sparkwire-offline/debian:bookworm

FROM ${MAVEN_IMAGE} AS libs
WORKDIR /build
COPY pom.xml pom.xml
RUN mvn -B -q dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=/build/libs && ls /build/libs | wc -l

FROM ${SPARK_IMAGE} AS jre

FROM ${BASE}
ENV JAVA_HOME=/opt/java/openjdk PATH=/opt/java/openjdk/bin:/opt/kafka/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
COPY --from=jre /opt/java/openjdk /opt/java/openjdk
COPY --from=libs /build/libs /opt/kafka/libs
COPY log4j2.properties /opt/kafka/config/log4j2.properties
COPY kafka-run-class.sh /opt/kafka/bin/kafka-run-class.sh
RUN set -eux; \
    cd /opt/kafka/bin; \
    for entry in kafka-server-start.sh:kafka.Kafka kafka-storage.sh:kafka.tools.StorageTool \
                 kafka-topics.sh:org.apache.kafka.tools.TopicCommand; do \
      printf '#!/usr/bin/env bash\nexec /opt/kafka/bin/kafka-run-class.sh %s "$@"\n' "${entry#*:}" > "${entry%%:*}"; \
    done; \
    chmod 0755 /opt/kafka/bin/*; \
    groupadd --system --gid 1000 appuser; \
    useradd --system --uid 1000 --gid 1000 --home-dir /home/appuser --create-home appuser; \
    kafka-storage.sh random-uuid; \
    kafka-topics.sh --version
USER 1000:1000
WORKDIR /opt/kafka
