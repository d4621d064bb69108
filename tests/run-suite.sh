#!/usr/bin/env bash
# `make test`'s pytest run: three lanes side by side on two cores (two lanes left ~30 % of both cores idle:
# Spark's triggers, Kafka's and Redis's failovers and the tests' fault windows wait more than they compute).
# Each lane runs its steps one after the other, each step a pytest process of its own (marks and paths):
#   spark   the tests marked `slow` of tests/e2e (the short chaos run first), tests/integration/spark and
#           test_rebuild; then tests/e2e's other tests
#   faults  every other `slow` test (the metrics job's faults, the Redis topologies); then tests/unit,
#           tests/deploy and tests/integration/harness; then the lint when SPARKWIRE_LINT names it
#   rest    everything else (the gateway's integration tests, the chart's)
# Every test is in exactly one step. Two Spark drivers may now run at once, one in each of the first two lanes;
# every step's Spark drivers but the chaos run's keep their scratch directories (java.io.tmpdir, spark.local.dir)
# in the run's folder, so SIGKILLed ones leave nothing in /tmp, and the short chaos run's check that its own
# left nothing there sees its own only. Lines are shown as they come, prefixed [spark], [faults], [rest] and [lint]; at the end the 25
# slowest tests, each lane's 8 slowest modules, then the failed ones with their message's first line (last, so
# a log cut to its tail still names them), then one closing line with the counts. Arguments are passed to
# every pytest step. (pytest-xdist's --dist loadgroup was the first choice; with pytest 9 its groups are not
# kept together, so the split is done here.)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PYTEST="${PYTEST:-.venv/bin/pytest}"
PYTHON="${PYTHON:-.venv/bin/python}"
out="$(mktemp -d "${TMPDIR:-/tmp}/sparkwire-tests.XXXXXX")"
ARGS=("$@")
REPORTS=()

# step LANE BLOCK NUMBER PYTEST-ARGS... : one pytest process of a lane; its free ports from the lane's block
# (harness/sparkwire_harness/stack/ports.py), its own temporary folder and JUnit report.
step() {
  local lane="$1" block="$2" number="$3"; shift 3
  SPARKWIRE_PORT_BLOCK="$block" "$PYTEST" "$@" "${ARGS[@]}" -p no:cacheprovider \
    --basetemp "$out/$lane-$number" --junitxml "$out/$lane-$number.xml" 2>&1 | sed -u "s/^/[$lane] /"
  local status="${PIPESTATUS[0]}"
  # 5: no test collected, which a step may well be given arguments that select a few tests (make test ARGS=-k..)
  ((status == 5 && ${#ARGS[@]} > 0)) && status=0
  return "$status"
}

# scratch LANE : Spark drivers started in this lane (the tests' own, and each one's children) keep their
# scratch in the run's folder, not in /tmp.
scratch() {
  mkdir -p "$out/$1-spark"
  export SPARK_LOCAL_DIRS="$out/$1-spark" SPARK_SUBMIT_OPTS="-Djava.io.tmpdir=$out/$1-spark"
}

spark_lane() {
  local status=0
  step spark 0 1 -m slow tests/e2e || status=$?  # the short chaos run, which checks /tmp itself
  scratch spark
  step spark 0 2 -m slow tests/integration/spark tests/integration/aggregator/test_rebuild.py || status=$?
  step spark 0 3 -m "not slow" tests/e2e || status=$?
  return "$status"
}

faults_lane() {
  local status=0
  scratch faults
  step faults 1 1 -m slow tests --ignore tests/e2e --ignore tests/integration/spark \
    --ignore tests/integration/aggregator/test_rebuild.py || status=$?
  step faults 1 2 -m "not slow" tests/unit tests/deploy tests/integration/harness || status=$?
  if [[ -n "${SPARKWIRE_LINT:-}" ]]; then
    bash -c "$SPARKWIRE_LINT" 2>&1 | sed -u 's/^/[lint] /'
    lint_status="${PIPESTATUS[0]}"
    echo "$lint_status" > "$out/lint.status"
    ((lint_status == 0)) || status=$lint_status
  fi
  return "$status"
}

rest_lane() {
  scratch rest
  step rest 2 1 -m "not slow" tests --ignore tests/e2e --ignore tests/unit --ignore tests/deploy \
    --ignore tests/integration/harness
}

for report in spark-1 spark-2 spark-3 faults-1 faults-2 rest-1; do REPORTS+=("$out/$report.xml"); done
start="$(cut -d. -f1 /proc/uptime)"
spark_lane & spark_pid=$!
faults_lane & faults_pid=$!
rest_lane & rest_pid=$!
status=0
for pid in "$spark_pid" "$faults_pid" "$rest_pid"; do
  wait "$pid" || status=1
done

elapsed="$(($(cut -d. -f1 /proc/uptime) - start))"
"$PYTHON" - "$elapsed" "$(cat "$out/lint.status" 2>/dev/null)" "${REPORTS[@]}" <<'PY'
import sys
import xml.etree.ElementTree as ET

from collections import Counter

cases, failed, totals = [], [], {"passed": 0, "failed": 0, "skipped": 0}
modules: dict[str, Counter[str]] = {}
elapsed, lint = sys.argv[1:3]
for path in sys.argv[3:]:
    run = modules.setdefault(path.rsplit("/", 1)[-1].removesuffix(".xml").split("-")[0], Counter())
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        failed.append(f"no report at {path}: that pytest run did not finish")
        totals["failed"] += 1
        continue
    for case in root.iter("testcase"):
        name = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
        cases.append((float(case.get("time") or 0), name))
        run[name.split("::")[0]] += float(case.get("time") or 0)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            totals["failed"] += 1
            # The message's first line only: the whole traceback is above, in its run's lines.
            message = (problem.get("message") or "").strip().splitlines()[:1]
            failed.append(f"{name}: {message[0][:300] if message else problem.tag}")
        elif case.find("skipped") is not None:
            totals["skipped"] += 1
        else:
            totals["passed"] += 1
print("\n25 slowest tests of all lanes (seconds, setup + call + teardown):")
for seconds, name in sorted(cases, reverse=True)[:25]:
    print(f"{seconds:8.1f}  {name}")
# Where each run's time goes, a module at a time: what to look at first when the suite grows.
for run, seconds in modules.items():
    print(f"\n{run} lane: {sum(seconds.values()):.0f} s of tests; its 8 slowest modules:")
    for module, total in seconds.most_common(8):
        print(f"{total:8.1f}  {module}")
# Last, so that a CI log cut to its tail still names what failed.
if failed:
    print("\nfailed:")
    for line in failed:
        print(f"  {line}")
if lint:  # the lint ran (its lines are above, prefixed [lint])
    print(f"\nlint (ruff, mypy): {'passed' if lint == '0' else 'FAILED, exit ' + lint}")
print(f"\nthe three lanes in {elapsed} s")
print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
PY
rm -rf "$out"
((status == 0))
