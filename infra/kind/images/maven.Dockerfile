# Offline stand-in for maven:3.9-eclipse-temurin-17 (the MAVEN_IMAGE of images/aggregator, whose connector
# stage runs `mvn -B -q dependency:copy-dependencies` on infra/maven/spark-kafka/pom.xml), built from
# Debian's packages only: maven (3.8.7) + openjdk-17-jdk-headless. `mvn` reaches Maven Central through the
# machine's TLS-inspecting proxy because ca-certificates-java builds Java's truststore
# (/etc/ssl/certs/java/cacerts) from the system store, which in the base image includes the host's extra CAs.
# JAVA_HOME=/opt/java/openjdk (a symlink to Debian's JDK) and MAVEN_HOME as in the official image.
#
#   docker build -f infra/kind/images/maven.Dockerfile -t sparkwire-offline/maven:3.9 infra/kind/images
ARG BASE=sparkwire-offline/debian:bookworm
FROM ${BASE}
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        openjdk-17-jdk-headless maven; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log; \
    mkdir -p /opt/java; \
    ln -s "/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)" /opt/java/openjdk; \
    # Every extra CA of the base image (e.g. the egress proxy's) must be in Java's truststore.
    for crt in /usr/local/share/ca-certificates/*.crt; do \
        [ -f "$crt" ] || continue; \
        fp="$(keytool -printcert -file "$crt" | sed -n 's/^[[:space:]]*SHA256: //p' | head -n 1)"; \
        test -n "$fp"; \
        keytool -list -cacerts -storepass changeit | grep -qF "$fp"; \
    done; \
    mvn -v
ENV JAVA_HOME=/opt/java/openjdk \
    LANG=C.UTF-8 \
    MAVEN_HOME=/usr/share/maven \
    MAVEN_CONFIG=/root/.m2
CMD ["mvn"]
