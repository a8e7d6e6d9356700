#!/usr/bin/env bash
# make test: every test package, in two streams at once.
#
# - The control-plane packages (test/..., provreq/client) mostly wait on timers: they run TEST_P at a
#   time (default 5), the longest first, so the last to start is a short one (docs/test-times.md has
#   the per-package times this order comes from; a package not named below runs after those named).
# - The other packages (unit tests: link-bound) run beside them, 2 at a time: the CPU the waiting
#   packages leave idle is what they use.
# Both build their test binaries as the image builds the binary (CGO_ENABLED=0 -trimpath, framework.GoBuild),
# so that one compile of the module serves the tests, the binary under test and the image, without -race:
# make test is CPU-bound on CI's 2 cores, and -race made each test binary's link and run cost about
# twice as much (docs/test-times.md, "Without -race"), and a race build of the module is a compile of its
# own. What runs under the race detector is in make test-slow, which CI runs after this: every unit package
# (make unit-race), test/integration/timers (its test process runs the whole loop) and test/integration/scaledown
# against the autoscaler binary built with -race, and the fault and failover tests.
# The fuzzing runs in make test-slow (each target's build is instrumented: on a cold cache that is one more
# compile of the module, some 700 s here; docs/test-times.md); go test runs every seed corpus here.
# Every test binary is linked without its symbol table and DWARF (-ldflags "-s -w": a link costs about a third
# less CPU, some 90 s of make test's wall time on 2 cores; stack traces keep their file and line), and go test's
# own vet pass is off (-vet=off): make lint, which CI runs first, runs all of go vet's checks on the same files.
# go test gives one -p to compiles and runs alike, so in one go test the long packages would hold every
# slot while they wait and the unit packages would compile only after them.
# Both streams always run to the end; the script fails if either failed.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

p=${TEST_P:-5}
# What every go test below is given (docs/test-times.md, "Links and vet").
link=(-vet=off "-ldflags=-s -w")
timeout=${TEST_TIMEOUT:-60m}
module=$(go list -m)

# Longest first (seconds on the 2-core CI, docs/test-times.md).
order=(
  test/chart test/integration/aws test/integration/clusterapi test/integration/healing
  test/integration/scaledown test/integration/scaleup test/integration/dra test/integration/fencing
  test/integration/fencingcapi test/integration/provreq test/integration/explain test/integration/burst
  test/integration/providers test/integration/lifecycle test/image test/integration/timers
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

# The binary under test, built here once for every package that runs it, into the directory and under the lock
# framework.BuildAutoscaler uses (so an up-to-date binary is left alone): otherwise each package asks go build
# again, some 2 CPU-s of the go command each (docs/test-times.md).
bin_dir=${TMPDIR:-/tmp}/ca-test-bin-$(printf %s "$(pwd)" | sha256sum | cut -c1-12)
mkdir -p "$bin_dir"
flock "$bin_dir/lock" env CGO_ENABLED=0 go build -trimpath "-ldflags=-s -w" -o "$bin_dir/cluster-autoscaler" ./cluster-autoscaler
export AUTOSCALER_TEST_BINARY=$bin_dir/cluster-autoscaler
# Each control plane's components on one processor each (framework.GOMAXPROCSEnv): five control planes and the
# unit stream share two cores, so a component's spare processors only spun and collected in parallel; a package's
# control plane used about a fifth less CPU so (docs/test-times.md). The benchmarks and the demo keep every core.
export LOCALCLUSTER_GOMAXPROCS=${LOCALCLUSTER_GOMAXPROCS:-1}
stamp "the binary under test" 0

(
  status=0
  # test/image builds the image for this machine's architecture only; make test-slow builds both.
  IMAGE_TEST_ARCHS=${IMAGE_TEST_ARCHS-$(go env GOARCH)} \
    CGO_ENABLED=0 go test -trimpath "${link[@]}" -count=1 -p "$p" -timeout "$timeout" "${long[@]}" || status=$?
  stamp "control-plane packages (${#long[@]}, -p $p)" "$status"
  exit "$status"
) &
long_pid=$!

(
  status=0
  # Niced: the control-plane stream is the longer one, and its tests' bursts (a loop, a drain, a
  # controller's reconcile) are what its timers wait for; the unit stream takes the CPU they leave.
  CGO_ENABLED=0 nice -n 5 go test -trimpath "${link[@]}" -count=1 -p 2 -timeout "$timeout" "${unit[@]}" || status=$?
  stamp "unit packages (${#unit[@]})" "$status"
  exit "$status"
) &
unit_pid=$!

failed=0
wait "$long_pid" || failed=1
wait "$unit_pid" || failed=1
stamp "make test" "$failed"
exit "$failed"
