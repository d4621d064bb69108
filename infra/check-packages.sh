#!/usr/bin/env bash
# The Python package as a user gets it (`make check-packages`; a phase of .ci/run):
#   1. builds the sdist and, from it, the wheel (`python -m build`) in a copy of the checkout's files;
#   2. checks them (`twine check --strict`; the wheel carries py.typed and the licence files);
#   3. installs each extra from the wheel into a fresh virtualenv (versions from constraints.txt, so from the
#      pip cache) and runs `sparkwire --help` there: exit 0 with any extra; a command whose extra is absent
#      exits 1 naming it; [client] holds no Spark, Redis or server library; [gateway] no Spark; [spark] the
#      pyspark of constraints.txt.
# Needs the venv of `make setup` (build, twine: the `package` dependency group).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
VENV="$ROOT/.venv/bin"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sparkwire-packages.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
T0="$(cut -d. -f1 /proc/uptime)"
say() { printf '[check-packages %3d s] %s\n' "$(($(cut -d. -f1 /proc/uptime) - T0))" "$*"; }
fail() { echo "check-packages: FAIL: $*" >&2; exit 1; }

# 1. Build from the files a clone would have (tracked, plus new ones not ignored), not the working tree, so
#    nothing (build/, *.egg-info) is written into the checkout and no untracked leftovers slip in.
mkdir -p "$WORK/src"
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' path; do
  [[ -e "$path" ]] && printf '%s\0' "$path"
done | tar --null -T - -cf - | tar -xf - -C "$WORK/src"
say "building the sdist, then the wheel from it"
"$VENV/python" -m build --outdir "$WORK/dist" "$WORK/src" >"$WORK/build.log" 2>&1 \
  || { cat "$WORK/build.log" >&2; fail "python -m build"; }
shopt -s nullglob
sdists=("$WORK"/dist/sparkwire-*.tar.gz) wheels=("$WORK"/dist/sparkwire-*-py3-none-any.whl)
((${#sdists[@]} == 1 && ${#wheels[@]} == 1)) || fail "expected one sdist and one wheel in $WORK/dist"
wheel="${wheels[0]}"
version="$("$VENV/python" -c 'import sys; sys.path.insert(0, "services"); import sparkwire; print(sparkwire.__version__)')"
[[ "$(basename "$wheel")" == "sparkwire-$version-py3-none-any.whl" ]] || fail "wheel $(basename "$wheel") is not version $version"
say "built $(basename "${sdists[0]}") and $(basename "$wheel")"

# 2. Metadata and contents.
"$VENV/twine" check --strict "$WORK"/dist/* || fail "twine check"
listing="$("$VENV/python" -m zipfile -l "$wheel")"
for member in sparkwire/py.typed "sparkwire-$version.dist-info/licenses/LICENSE" \
              "sparkwire-$version.dist-info/licenses/NOTICE" sparkwire/gateway/static/vendor/uPlot.LICENSE \
              sparkwire/replaylog/lua/ sparkwire/client/js/sparkwire-client.js; do
  grep -qF "$member" <<<"$listing" || fail "the wheel has no $member"
done
metadata="$("$VENV/python" -m zipfile -e "$wheel" "$WORK/unpacked" && cat "$WORK/unpacked/sparkwire-$version.dist-info/METADATA")"
grep -qx "License-Expression: Apache-2.0" <<<"$metadata" || fail "METADATA has no License-Expression: Apache-2.0"
for extra in client gateway spark server; do
  grep -qx "Provides-Extra: $extra" <<<"$metadata" || fail "METADATA provides no extra $extra"
done
grep -q "^Provides-Extra: dev" <<<"$metadata" && fail "dev tools are an extra (they belong in [dependency-groups])"
grep -q "==[0-9]" <(grep "^Requires-Dist:" <<<"$metadata") && fail "an exact pin in Requires-Dist (pins go in constraints.txt)"
say "twine check and the wheel's contents: ok"

# 3. Each extra in a fresh virtualenv (no pip of its own: the checkout's pip installs into it, --python).
# expect_exit CODE TEXT COMMAND... : COMMAND exits CODE and (for a non-zero CODE) its stderr holds TEXT.
expect_exit() {
  local code="$1" text="$2" status=0 err; shift 2
  err="$("$@" 2>&1 >/dev/null)" || status=$?
  ((status == code)) || fail "$* exited $status, expected $code: $err"
  [[ "$code" == 0 || "$err" == *"$text"* ]] || fail "$*: stderr does not name '$text': $err"
}
pyspark_pin="$(sed -n 's/^pyspark==//p' constraints.txt)"
for extra in client gateway spark server; do
  venv="$WORK/venv-$extra"
  "$VENV/python" -m venv --without-pip "$venv"
  "$VENV/pip" --python "$venv/bin/python" install --quiet --disable-pip-version-check --no-compile \
    -c constraints.txt "${wheel}[${extra}]" || fail "pip install sparkwire[$extra] from the wheel"
  installed="$("$VENV/pip" --python "$venv/bin/python" list --format=freeze --disable-pip-version-check 2>/dev/null)"
  has() { grep -qiE "^$1(==|$)" <<<"$installed"; }  # has NAME or has NAME==VERSION
  expect_exit 0 "" "$venv/bin/sparkwire" --help
  expect_exit 0 "" "$venv/bin/sparkwire" --version
  case "$extra" in
    client)
      for absent in pyspark redis starlette uvicorn confluent-kafka pyjwt prometheus-client; do
        ! has "$absent" || fail "[client] installed $absent"
      done
      expect_exit 1 "pip install 'sparkwire[gateway]'" "$venv/bin/sparkwire" gateway --help
      expect_exit 1 "pip install 'sparkwire[spark]'" "$venv/bin/sparkwire" aggregate --help
      "$venv/bin/python" -c "import sparkwire.client, sparkwire.protocol" || fail "[client] cannot import the client" ;;
    gateway)
      ! has pyspark || fail "[gateway] installed pyspark"
      expect_exit 0 "" "$venv/bin/sparkwire" gateway --help
      expect_exit 0 "" "$venv/bin/sparkwire" token --help
      expect_exit 1 "pip install 'sparkwire[spark]'" "$venv/bin/sparkwire" produce --help ;;
    spark)
      has "pyspark==$pyspark_pin" || fail "[spark] did not install pyspark $pyspark_pin (constraints.txt)"
      ! has starlette || fail "[spark] installed starlette"
      expect_exit 0 "" "$venv/bin/sparkwire" aggregate --help
      expect_exit 0 "" "$venv/bin/sparkwire" produce --help
      expect_exit 1 "pip install 'sparkwire[gateway]'" "$venv/bin/sparkwire" gateway --help
      "$venv/bin/python" -c "from sparkwire.spark import Job, main" || fail "[spark] cannot import sparkwire.spark" ;;
    server)
      for command in aggregate rebuild produce gateway token; do
        expect_exit 0 "" "$venv/bin/sparkwire" "$command" --help
      done ;;
  esac
  say "sparkwire[$extra] from the wheel: installed, sparkwire --help ok"
  rm -rf "$venv"
done
say "OK: sdist and wheel of sparkwire $version, extras client, gateway, spark, server"
