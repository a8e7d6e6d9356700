package faults

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// LongEnv runs the long variants of the reliability tests (see
// docs/reliability.md) when set to a non-empty value.
const LongEnv = "RELIABILITY_LONG"

func skipUnlessLong(t *testing.T) {
	t.Helper()
	if os.Getenv(LongEnv) == "" {
		t.Skipf("a long variant: set %s=1 to run it", LongEnv)
	}
}

// countMatches counts the lines of log that contain every one of parts.
func countMatches(log string, parts ...string) int {
	n := 0
	for _, line := range strings.Split(log, "\n") {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(line, p)
		}
		if ok {
			n++
		}
	}
	return n
}

var lastActivityRE = regexp.MustCompile(`cluster_autoscaler_last_activity\{activity="mainSuccessful"\} (\S+)`)

// lastSuccessfulLoop reads when the autoscaler last finished a loop
// without error, from its /metrics.
func lastSuccessfulLoop(t *testing.T, p *itest.AutoscalerProcess) time.Time {
	t.Helper()
	_, body, err := p.Get(t.Context(), "/metrics")
	if err != nil {
		return time.Time{}
	}
	m := lastActivityRE.FindStringSubmatch(body)
	if m == nil {
		return time.Time{}
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, int64(v*1e9))
}
