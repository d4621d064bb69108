#!/usr/bin/env bash
# One-time (and idempotent) setup of what sparkwire runs on, in two parts:
#   infra/setup.sh demo  what `make demo` runs: the Python venv, redis-server and nginx from apt, a real Kafka
#                        broker's jars and Spark's Kafka connector jars from Maven Central, the Spark driver's
#                        class-data archive;
#   infra/setup.sh all   (the default) that, plus what only the tests use: chromium and shellcheck from apt,
#                        toxiproxy (the chaos run's fault proxy), the browser client's npm dev dependencies,
#                        helm and friends from the Go module proxy (infra/k8s-tools.sh).
# Each step is skipped while the stamp of its inputs in .cache/stamps is fresh and its outputs exist; each
# step prints how long it took.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
CACHE="${SPARKWIRE_CACHE:-$ROOT/.cache}"
PYTHON="${PYTHON:-python3}"
mkdir -p "$CACHE/stamps"

# shellcheck source=infra/lib.sh
source "$ROOT/infra/lib.sh"

# mvn_copy POM_DIR OUT_DIR : copy a dependency-list pom's runtime jars into OUT_DIR.
# -B keeps the log plain; Maven still prints one line per artifact it downloads.
mvn_copy() {
  local pom_dir="$1" out="$2" tmp="$2.tmp"
  rm -rf "$tmp"
  (cd "$pom_dir" && mvn -B dependency:copy-dependencies \
      -DincludeScope=runtime -DoutputDirectory="$tmp")
  rm -rf "$out"
  mv "$tmp" "$out"
}

step_venv() {
  header "Python venv (.venv): pip install -c constraints.txt -e '.[server]' --group dev -e ./harness"
  local fp
  fp="$(fingerprint pyproject.toml harness/pyproject.toml constraints.txt)"
  if fresh venv "$fp" && [[ -x .venv/bin/python ]]; then
    echo "up to date"; return
  fi
  [[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
  # pip >= 25.1 reads dependency groups (--group, PEP 735): the dev tools are a group, not an extra. No
  # bytecode compiled here: Python compiles a module when it is first imported, and most of the ~40 packages'
  # modules never are (61 -> 43 s here). Under make, the compiled module is kept in .cache/pycache for the
  # next process (the Makefile's PYTHONPYCACHEPREFIX), even where PYTHONDONTWRITEBYTECODE is set.
  .venv/bin/python -m pip install --upgrade pip
  .venv/bin/python -m pip install --no-compile -c constraints.txt -e '.[server]' --group dev -e ./harness
  stamp venv "$fp"
}

# step_apt [test] : redis-server and nginx (the demo's), and with `test` chromium (the browser client's test)
# and shellcheck (the infra scripts' check).
step_apt() {
  local missing=()
  command -v redis-server >/dev/null || missing+=(redis-server)
  command -v nginx >/dev/null || [[ -x /usr/sbin/nginx ]] || missing+=(nginx)
  if [[ "${1:-}" == test ]]; then
    header "System packages for the tests: chromium (browser client test), shellcheck (infra scripts)"
    command -v chromium >/dev/null || missing+=(chromium)
    command -v shellcheck >/dev/null || missing+=(shellcheck)
  else
    header "System packages: redis-server, nginx"
  fi
  if ((${#missing[@]} == 0)); then
    echo "already installed"; return
  fi
  if [[ "$(id -u)" != 0 ]]; then
    echo "WARNING: not root, cannot install: ${missing[*]}"
    echo "         run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    return
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${missing[@]}"
}

step_kafka() {
  header "Apache Kafka broker jars (infra/maven/kafka) -> .cache/kafka/libs"
  local fp
  fp="$(fingerprint infra/maven/kafka/pom.xml)"
  if fresh kafka "$fp" && compgen -G "$CACHE/kafka/libs/kafka_2.13-*.jar" >/dev/null; then
    echo "up to date"; return
  fi
  mvn_copy infra/maven/kafka "$CACHE/kafka/libs"
  stamp kafka "$fp"
}

step_spark_kafka() {
  header "Spark Kafka connector jars (infra/maven/spark-kafka) -> .cache/spark-jars"
  local fp
  fp="$(fingerprint infra/maven/spark-kafka/pom.xml)"
  if fresh spark-kafka "$fp" && compgen -G "$CACHE/spark-jars/spark-sql-kafka-*.jar" >/dev/null; then
    echo "up to date"; return
  fi
  mvn_copy infra/maven/spark-kafka "$CACHE/spark-jars"
  stamp spark-kafka "$fp"
}

step_spark_class_archive() {
  header "Class-data-sharing archive of a local Spark driver (sparkwire.spark.runtime.class_archive) -> .cache/spark-cds"
  local fp
  # The archive fits one JDK and one classpath, which holds this checkout's path (its .venv's pyspark jars):
  # with a cache shared by checkouts (SPARKWIRE_CACHE, as .ci/run sets), each checkout writes its own.
  fp="$(fingerprint constraints.txt infra/maven/spark-kafka/pom.xml services/sparkwire/spark/runtime/class_archive.py)-$(java -version 2>&1 | head -1 | tr -cd '[:alnum:]._-')-$(echo "$ROOT" | sha256sum | cut -c1-12)"
  if fresh spark-cds "$fp" && [[ -f "$CACHE/spark-cds/driver.jsa" ]]; then
    echo "up to date"; return
  fi
  # Optional: without it a local driver starts ~3 s slower, nothing else changes.
  if .venv/bin/python -m sparkwire.spark.runtime.class_archive "$CACHE/spark-cds/driver.jsa"; then
    stamp spark-cds "$fp"
  else
    echo "WARNING: no class archive; local Spark drivers start without it" >&2
  fi
}

step_toxiproxy() {
  header "toxiproxy-server (infra/go/toxiproxy, github.com/Shopify/toxiproxy/v2) -> .cache/toxiproxy/bin"
  local fp out="$CACHE/toxiproxy/bin/toxiproxy-server" version
  fp="$(fingerprint infra/go/toxiproxy/go.mod infra/go/toxiproxy/go.sum infra/go/toxiproxy/tools.go)"
  if fresh toxiproxy "$fp" && [[ -x "$out" ]]; then
    echo "up to date"; return
  fi
  command -v go >/dev/null || { echo "ERROR: go is required to build toxiproxy (https://go.dev/dl/)" >&2; return 1; }
  version="$(sed -n 's/^require github.com\/Shopify\/toxiproxy\/v2 \(v[0-9.]*\)$/\1/p' infra/go/toxiproxy/go.mod)"
  mkdir -p "$(dirname "$out")"
  # go.sum pins every module; -mod=readonly refuses to build if it does not cover them.
  (cd infra/go/toxiproxy && CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" go build -trimpath \
      -ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=${version#v}" -o "$out.tmp" \
      github.com/Shopify/toxiproxy/v2/cmd/server)
  mv "$out.tmp" "$out"
  "$out" -version
  stamp toxiproxy "$fp"
}

step_npm() {
  header "Browser client's npm package (services/sparkwire/client/js): npm ci (TypeScript, to check its declarations)"
  local fp dir=services/sparkwire/client/js
  fp="$(fingerprint "$dir/package.json" "$dir/package-lock.json")"
  if fresh npm "$fp" && [[ -d "$dir/node_modules" ]]; then
    echo "up to date"; return
  fi
  command -v npm >/dev/null || { echo "ERROR: npm is required (Node.js >= 20, https://nodejs.org)" >&2; return 1; }
  npm ci --prefix "$dir" --no-audit --no-fund
  stamp npm "$fp"
}

step_k8s_tools() {
  header "Kubernetes tooling from the Go module proxy (infra/k8s-tools.sh) -> .cache/k8s"
  bash infra/k8s-tools.sh
}

PART="${1:-all}"
[[ "$PART" == demo || "$PART" == all ]] || { echo "usage: infra/setup.sh [demo|all]" >&2; exit 2; }
SETUP_T0="$(uptime_s)"
# timed STEP : run a step, print how long it took (a cold first run is mostly Maven and Go downloads).
timed() {
  local start; start="$(uptime_s)"
  "$@"
  printf '   [%s: %d s]\n' "$1" $(($(uptime_s) - start))
}
timed step_venv
timed step_apt
timed step_kafka
timed step_spark_kafka
timed step_spark_class_archive
if [[ "$PART" == all ]]; then
  timed step_apt test
  timed step_toxiproxy
  timed step_npm
  timed step_k8s_tools
fi
header "setup ($PART) done in $(($(uptime_s) - SETUP_T0)) s"
