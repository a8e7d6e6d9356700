#!/usr/bin/env bash
# Fuzzes each target given as <package>:<FuzzName> for FUZZ_TIME (default 10s).
#
# Go 1.26's fuzzing coordinator can fail a run that found nothing with a bare
# "context deadline exceeded" exactly at the end of -fuzztime, on a loaded
# machine (golang/go#75804, fixed in Go 1.27). A run that fails that way and
# wrote no failing input under testdata/fuzz/<FuzzName> is run once more; any
# other failure, or the same one twice, fails. A real failing input is always
# written there, so a crash or a hang is never taken for the race.
set -euo pipefail

fuzz_time=${FUZZ_TIME:-10s}
# FUZZ_PARALLEL: fuzzing workers per target (go test's default: GOMAXPROCS).

inputs() { # the failing inputs stored for a target, one per line
  local dir="$1/testdata/fuzz/$2"
  if [ -d "$dir" ]; then find "$dir" -type f | sort; fi
}

for t in "$@"; do
  pkg=${t%%:*} name=${t#*:}
  for attempt in 1 2; do
    echo "fuzzing $name in $pkg for $fuzz_time"
    before=$(inputs "$pkg" "$name")
    out=$(mktemp)
    status=0
    go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzz_time" ${FUZZ_PARALLEL:+-parallel "$FUZZ_PARALLEL"} "$pkg" 2>&1 | tee "$out" || status=$?
    after=$(inputs "$pkg" "$name")
    if [ "$status" -eq 0 ]; then
      rm -f "$out"
      break
    fi
    race=0
    if [ "$before" = "$after" ] && grep -qx -- "--- FAIL: $name ([0-9.]*s)" "$out" &&
      grep -A1 -- "--- FAIL: $name" "$out" | tail -n1 | grep -qx '[[:space:]]*context deadline exceeded'; then
      race=1
    fi
    rm -f "$out"
    if [ "$race" -eq 1 ] && [ "$attempt" -eq 1 ]; then
      echo "$name: 'context deadline exceeded' at the end of -fuzztime and no failing input written:" \
        "Go's coordinator race (golang/go#75804); running it once more"
      continue
    fi
    echo "$name: fuzzing failed" >&2
    exit 1
  done
done
