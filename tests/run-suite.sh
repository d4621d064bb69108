#!/usr/bin/env bash
# `make test`'s pytest run: two pytest processes side by side, one per core. One runs the tests marked `slow`
# (each starts a Spark driver or a Redis/Kafka topology and times its faults) one after the other, as they
# would alone, so two Spark drivers never time each other; the other runs everything else, then the lint
# when SPARKWIRE_LINT names it. Their lines are shown as they come, prefixed [slow], [rest] and [lint]; at
# the end the 25 slowest tests of both, each run's 8 slowest modules, then the failed ones with their
# message's first line (last, so a log cut to its tail still names them), then one closing line with the
# counts of both. Arguments are passed to both pytest runs. (pytest-xdist's --dist loadgroup was the first
# choice; with pytest 9 its groups are not kept together, so the split is done here.)
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PYTEST="${PYTEST:-.venv/bin/pytest}"
PYTHON="${PYTHON:-.venv/bin/python}"
out="$(mktemp -d "${TMPDIR:-/tmp}/sparkwire-tests.XXXXXX")"

# run NAME BLOCK MARKS... : one pytest run; its free ports from a block of its own
# (harness/sparkwire_harness/stack/ports.py), its own temporary folder and JUnit report.
run() {
  local name="$1" block="$2"; shift 2
  SPARKWIRE_PORT_BLOCK="$block" "$PYTEST" tests "$@" -p no:cacheprovider --basetemp "$out/$name" \
    --junitxml "$out/$name.xml" 2>&1 | sed -u "s/^/[$name] /"
  return "${PIPESTATUS[0]}"
}

# rest_then_lint ARGS... : the run of everything else, then SPARKWIRE_LINT when set (make test sets it to
# `make lint`: ruff and mypy, ~30 s): after the shorter run, beside the slow run's last tests, not after both.
rest_then_lint() {
  local status=0
  run rest 1 -m "not slow" "$@" || status=$?
  if [[ -n "${SPARKWIRE_LINT:-}" ]]; then
    bash -c "$SPARKWIRE_LINT" 2>&1 | sed -u 's/^/[lint] /'
    lint_status="${PIPESTATUS[0]}"
    echo "$lint_status" > "$out/lint.status"
    ((lint_status == 0)) || status=$lint_status
  fi
  return "$status"
}

start="$(cut -d. -f1 /proc/uptime)"
run slow 0 -m slow "$@" &
slow_pid=$!
rest_then_lint "$@" &
rest_pid=$!
wait "$slow_pid"; slow_status=$?
wait "$rest_pid"; rest_status=$?

elapsed="$(($(cut -d. -f1 /proc/uptime) - start))"
"$PYTHON" - "$out/slow.xml" "$out/rest.xml" "$elapsed" "$(cat "$out/lint.status" 2>/dev/null)" <<'PY'
import sys
import xml.etree.ElementTree as ET

from collections import Counter

cases, failed, totals = [], [], {"passed": 0, "failed": 0, "skipped": 0}
modules: dict[str, Counter[str]] = {}
for path in sys.argv[1:3]:
    run = modules.setdefault(path.rsplit("/", 1)[-1].removesuffix(".xml"), Counter())
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
print("\n25 slowest tests of both runs (seconds, setup + call + teardown):")
for seconds, name in sorted(cases, reverse=True)[:25]:
    print(f"{seconds:8.1f}  {name}")
# Where each run's time goes, a module at a time: what to look at first when the suite grows.
for run, seconds in modules.items():
    print(f"\n{run}: {sum(seconds.values()):.0f} s of tests; its 8 slowest modules:")
    for module, total in seconds.most_common(8):
        print(f"{total:8.1f}  {module}")
# Last, so that a CI log cut to its tail still names what failed.
if failed:
    print("\nfailed:")
    for line in failed:
        print(f"  {line}")
if sys.argv[4]:  # the lint ran (its lines are above, prefixed [lint])
    print(f"\nlint (ruff, mypy): {'passed' if sys.argv[4] == '0' else 'FAILED, exit ' + sys.argv[4]}")
print(f"\nboth pytest runs in {sys.argv[3]} s")
print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
PY
rm -rf "$out"
((slow_status == 0 && rest_status == 0))
