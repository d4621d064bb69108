# Offline stand-in for the official Spark 4.2.0 image (spark:4.2.0-scala2.13-java17-ubuntu, the SPARK_IMAGE of
# images/aggregator, and the base of the Spark operator image), built without an image registry:
#   /opt/java/openjdk   Debian's openjdk-17-jre-headless, copied with every symlink dereferenced, so that
#                       COPY --from of just this directory into another image gives a working `java`
#                       (lib/security/cacerts included: ca-certificates-java's store, which holds the
#                       base image's extra CAs)
#   /opt/spark/{RELEASE,bin,sbin,jars,python,data,licenses}, /opt/spark/examples/src/main/python
#                       Spark 4.2.0 from the pyspark==4.2.0 sdist on PyPI (sha256-pinned; it carries the
#                       release's jars, bin/, sbin/, the pyspark package, python/lib/py4j-0.10.9.9-src.zip
#                       and python/lib/pyspark.zip); RELEASE is written from spark-common-utils'
#                       spark-version-info.properties as make-distribution.sh would ("Spark 4.2.0 (git
#                       revision ...) built for Hadoop ...")
#   /opt/entrypoint.sh, /opt/decom.sh
#                       the official image's scripts, vendored verbatim in infra/kind/images/spark/ (Apache-2.0,
#                       see spark/NOTICE)
#   user spark 185:185, bash, tini, procps, libnss-wrapper, gosu (what the scripts use),
#   JAVA_HOME=/opt/java/openjdk and SPARK_HOME=/opt/spark with java and spark-submit on PATH,
#   WORKDIR /opt/spark/work-dir (group-writable), USER spark, ENTRYPOINT /opt/entrypoint.sh.
# Not carried (the project's images do not use them; the sdist does not ship the first four): the examples
# jar (so SparkPi is only examples/src/main/python/pi.py here), kubernetes/tests, R, sbin's standalone-cluster
# scripts, krb5-user, wget, gnupg2, net-tools. The JRE is Debian's OpenJDK 17 headless instead of Eclipse
# Temurin 17 (AWT/font/sound/smart-card libraries are not installed; Spark does not load them). Unlike the
# official image, $SPARK_HOME/bin is also on PATH.
#
#   docker build -f infra/kind/images/spark.Dockerfile -t sparkwire-offline/spark:4.2.0 infra/kind/images
#
# The ~450 MB sdist is downloaded by pip inside the build, in a stage whose only inputs are the base image
# and the pinned version + hash below: that layer stays in Docker's build cache, so rebuilds (and changes to
# the final stage) neither download it again nor send it as build context.
ARG BASE=sparkwire-offline/debian:bookworm

# --- Spark 4.2.0 from the pyspark sdist ---------------------------------------------------------------------
FROM ${BASE} AS dist
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-pip; \
    rm -rf /var/lib/apt/lists/*
ARG SPARK_VERSION=4.2.0
ARG PYSPARK_SDIST_SHA256=5ad689d53570ee1674193fd4f9bda065f0db3be9363a27d2a3406cc457b70b61
# The download alone in one layer (the stage's layers never reach the final image).
RUN set -eux; \
    echo "pyspark==${SPARK_VERSION} --hash=sha256:${PYSPARK_SDIST_SHA256}" > /tmp/requirements.txt; \
    PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 pip download --no-deps --no-binary :all: \
        --require-hashes --requirement /tmp/requirements.txt --dest /tmp/dl; \
    ls -l /tmp/dl
RUN set -eux; \
    mkdir -p /tmp/src /opt/spark/python; \
    tar -xzf "/tmp/dl/pyspark-${SPARK_VERSION}.tar.gz" -C /tmp/src --strip-components=1; \
    cd /tmp/src; \
    mv deps/jars deps/bin deps/sbin /opt/spark/; \
    mkdir -p /opt/spark/examples/src/main; \
    mv deps/examples /opt/spark/examples/src/main/python; \
    mv deps/data /opt/spark/data; \
    mv deps/licenses /opt/spark/licenses; \
    mv pyspark /opt/spark/python/pyspark; \
    mv lib /opt/spark/python/lib; \
    cd /; \
    rm -rf /tmp/src; \
    # RELEASE as make-distribution.sh writes it, from the build info Spark compiles into spark-common-utils.
    python3 -c 'import sys, zipfile; sys.stdout.write(zipfile.ZipFile(sys.argv[1]).read("spark-version-info.properties").decode())' \
        /opt/spark/jars/spark-common-utils_*-"${SPARK_VERSION}".jar > /tmp/version-info; \
    grep -qx "version=${SPARK_VERSION}" /tmp/version-info; \
    revision="$(sed -n 's/^revision=//p' /tmp/version-info | cut -c1-11)"; \
    test -n "$revision"; \
    hadoop="$(basename /opt/spark/jars/hadoop-client-api-*.jar .jar | sed 's/^hadoop-client-api-//')"; \
    printf 'Spark %s (git revision %s) built for Hadoop %s\nBuild flags: (not recorded: assembled from the pyspark %s sdist on PyPI)\n' \
        "$SPARK_VERSION" "$revision" "$hadoop" "$SPARK_VERSION" > /opt/spark/RELEASE; \
    rm /tmp/version-info; \
    cat /opt/spark/RELEASE; \
    ls /opt/spark/python/lib/py4j-*-src.zip /opt/spark/python/lib/pyspark.zip /opt/spark/bin/spark-submit \
       "/opt/spark/jars/spark-core_2.13-${SPARK_VERSION}.jar" "/opt/spark/jars/spark-kubernetes_2.13-${SPARK_VERSION}.jar"

# --- the JRE, self-contained in /opt/java/openjdk ---------------------------------------------------------
FROM ${BASE} AS jre
RUN set -eux; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openjdk-17-jre-headless; \
    rm -rf /var/lib/apt/lists/*; \
    mkdir -p /opt/java; \
    cp -rL "/usr/lib/jvm/java-17-openjdk-$(dpkg --print-architecture)" /opt/java/openjdk; \
    test -z "$(find /opt/java/openjdk -type l)"; \
    # Every extra CA of the base image (e.g. the egress proxy's) must be in the copied truststore.
    for crt in /usr/local/share/ca-certificates/*.crt; do \
        [ -f "$crt" ] || continue; \
        fp="$(/opt/java/openjdk/bin/keytool -printcert -file "$crt" | sed -n 's/^[[:space:]]*SHA256: //p' | head -n 1)"; \
        test -n "$fp"; \
        /opt/java/openjdk/bin/keytool -list -keystore /opt/java/openjdk/lib/security/cacerts -storepass changeit \
            | grep -qF "$fp"; \
    done

# --- runtime ---------------------------------------------------------------------------------------------
FROM ${BASE}
ARG spark_uid=185
ENV JAVA_HOME=/opt/java/openjdk \
    SPARK_HOME=/opt/spark \
    LANG=C.UTF-8
ENV PATH=$JAVA_HOME/bin:$SPARK_HOME/bin:$PATH
RUN set -eux; \
    groupadd --system --gid=${spark_uid} spark; \
    useradd --system --uid=${spark_uid} --gid=spark spark; \
    apt-get update; \
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        bash tini procps libnss-wrapper gosu; \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt/* /var/log/dpkg.log; \
    mkdir -p /opt/spark/work-dir; \
    chmod g+w /opt/spark/work-dir; \
    chown spark:spark /opt/spark /opt/spark/work-dir
COPY --from=jre /opt/java/openjdk /opt/java/openjdk
COPY --from=dist --chown=spark:spark /opt/spark /opt/spark
COPY spark/entrypoint.sh spark/decom.sh /opt/
COPY spark/NOTICE /opt/spark/licenses/NOTICE-entrypoint-decom
RUN set -eux; \
    chmod a+x /opt/entrypoint.sh /opt/decom.sh; \
    java -version; \
    spark-submit --version
WORKDIR /opt/spark/work-dir
USER spark
ENTRYPOINT ["/opt/entrypoint.sh"]
