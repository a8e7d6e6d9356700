#!/usr/bin/env bash
# make test: every test package with -race, in two streams at once.
#
# - The control-plane packages (test/..., provreq/client) mostly wait on timers: they run TEST_P at a
#   time (default 5), the longest first, so the last to start is a short one (docs/test-times.md has
#   the per-package times this order comes from; a package not named below runs after those named).
# - The other packages (unit tests: compile-bound) run beside them, 2 at a time: the CPU the waiting
#   packages leave idle is what they use.
# The fuzzing runs in make test-slow (each target's build is instrumented: on a cold cache that is one more
# compile of the module, some 700 s here; docs/test-times.md); go test runs every seed corpus here.
# go test gives one -p to compiles and runs alike, so in one go test the long packages would hold every
# slot while they wait and the unit packages would compile only after them.
# Both streams always run to the end; the script fails if either failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

p=${TEST_P:-5}
timeout=${TEST_TIMEOUT:-60m}
module=$(go list -m)

# Longest first (seconds on the 2-core CI, docs/test-times.md).
order=(
  test/integration/clusterapi test/integration/fencingcapi test/integration/scaledown test/integration/fencing
  test/integration/healing test/integration/scaleup test/chart test/integration/providers test/integration/dra
  test/integration/provreq
  test/integration/lifecycle test/image test/integration/burst test/integration/explain test/integration/aws
)

mapfile -t all < <(go list ./...)
long=()
for rel in "${order[@]}"; do long+=("$module/$rel"); done
unit=()
for pkg in "${all[@]}"; do
  rel=${pkg#"$module"/}
  case " ${order[*]} " in *" $rel "*) continue ;; esac
  case "$rel" in
    test/* | provreq/client | provreq/client/*) long+=("$pkg") ;;
    *) unit+=("$pkg") ;;
  esac
done

start=$SECONDS
stamp() { echo "== $1 took $((SECONDS - start))s (exit $2)"; }

(
  status=0
  # test/image builds the image for this machine's architecture only; make test-slow builds both.
  IMAGE_TEST_ARCHS=${IMAGE_TEST_ARCHS-$(go env GOARCH)} \
    go test -race -count=1 -p "$p" -timeout "$timeout" "${long[@]}" || status=$?
  stamp "control-plane packages (${#long[@]}, -p $p)" "$status"
  exit "$status"
) &
long_pid=$!

(
  status=0
  # Niced: the control-plane stream is the longer one, and its tests' bursts (a loop, a drain, a
  # controller's reconcile) are what its timers wait for; the unit stream takes the CPU they leave.
  nice -n 5 go test -race -count=1 -p 2 -timeout "$timeout" "${unit[@]}" || status=$?
  stamp "unit packages (${#unit[@]})" "$status"
  exit "$status"
) &
unit_pid=$!

failed=0
wait "$long_pid" || failed=1
wait "$unit_pid" || failed=1
stamp "make test" "$failed"
exit "$failed"
