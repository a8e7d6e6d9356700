package provreq

import (
	"fmt"
	"math"
	"strconv"
	"time"

	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
)

// Keys of spec.parameters that the autoscaler reads. Other keys (for example
// a cloud's own) are ignored, never an error.
const (
	// ParamNoRetry ("true" or "false"), check-capacity only: when the pods
	// do not fit, fail the request at once instead of retrying later.
	ParamNoRetry = "noRetry"
	// ParamProcessorInstance, check-capacity only: the name of the
	// autoscaler instance (--check-capacity-processor-instance) that
	// handles the request; empty or absent means an instance without a
	// name.
	ParamProcessorInstance = "processorInstance"
	// ParamValidUntilSeconds, a whole number of seconds after the request's
	// creation: past that, a request that is not provisioned yet fails.
	ParamValidUntilSeconds = "ValidUntilSeconds"
	// ParamMaxRunDurationSeconds, a whole number of seconds (GKE's
	// flex-start and queued-provisioning parameter, which Kueue passes on
	// from its provreq.kueue.x-k8s.io/maxRunDurationSeconds annotation):
	// that long after the request became Provisioned its capacity is
	// revoked and the nodes its scale-up made are released.
	ParamMaxRunDurationSeconds = "maxRunDurationSeconds"
)

// MaxRunDurationLimit is the largest maxRunDurationSeconds accepted: 7
// days, as GKE caps it.
const MaxRunDurationLimit = 7 * 24 * time.Hour

// maxValidUntilSeconds is the largest ValidUntilSeconds that fits a
// time.Duration.
const maxValidUntilSeconds = math.MaxInt64 / int64(time.Second)

// ParseNoRetry reads the noRetry parameter: false when absent, an error when
// it is not a boolean (strconv.ParseBool's spellings).
func ParseNoRetry(params map[string]v1.Parameter) (bool, error) {
	return ParseBoolParameter(params, ParamNoRetry)
}

// ParseBoolParameter reads a boolean parameter: false when absent, an error
// when it is not a boolean (strconv.ParseBool's spellings: true, True,
// TRUE, t, 1 and their false counterparts).
func ParseBoolParameter(params map[string]v1.Parameter, key string) (bool, error) {
	raw, ok := params[key]
	if !ok {
		return false, nil
	}
	b, err := strconv.ParseBool(string(raw))
	if err != nil {
		return false, fmt.Errorf("parameter %s=%q: not true or false", key, raw)
	}
	return b, nil
}

// ProcessorInstance returns the processorInstance parameter, "" when absent.
func ProcessorInstance(params map[string]v1.Parameter) string {
	return string(params[ParamProcessorInstance])
}

// ParseValidUntilSeconds reads the ValidUntilSeconds parameter. It reports
// set=false when the parameter is absent, and an error when it is not a
// positive whole number of seconds in decimal (no sign, spaces or units)
// small enough for a time.Duration.
func ParseValidUntilSeconds(params map[string]v1.Parameter) (d time.Duration, set bool, err error) {
	return parseSeconds(params, ParamValidUntilSeconds, maxValidUntilSeconds)
}

// ParseMaxRunDurationSeconds reads the maxRunDurationSeconds parameter as
// ParseValidUntilSeconds reads its own, with a cap of MaxRunDurationLimit.
func ParseMaxRunDurationSeconds(params map[string]v1.Parameter) (d time.Duration, set bool, err error) {
	return parseSeconds(params, ParamMaxRunDurationSeconds, int64(MaxRunDurationLimit/time.Second))
}

// parseSeconds reads parameter key as a whole number of seconds from 1 to
// limit, written in decimal digits only.
func parseSeconds(params map[string]v1.Parameter, key string, limit int64) (d time.Duration, set bool, err error) {
	raw, ok := params[key]
	if !ok {
		return 0, false, nil
	}
	s := string(raw)
	if s == "" {
		return 0, true, fmt.Errorf("parameter %s is empty", key)
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, true, fmt.Errorf("parameter %s=%q: not a whole number of seconds", key, s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > limit {
		if limit < maxValidUntilSeconds {
			return 0, true, fmt.Errorf("parameter %s=%q: above the limit of %d seconds", key, s, limit)
		}
		return 0, true, fmt.Errorf("parameter %s=%q: too large", key, s)
	}
	if n == 0 {
		return 0, true, fmt.Errorf("parameter %s=%q: must be at least 1", key, s)
	}
	return time.Duration(n) * time.Second, true, nil
}

// ValidUntil returns the deadline that the ValidUntilSeconds parameter of pr
// sets: its creation time plus that many seconds. set is false when the
// parameter is absent; err is the parse error of a bad value.
func ValidUntil(pr *v1.ProvisioningRequest) (deadline time.Time, set bool, err error) {
	d, set, err := ParseValidUntilSeconds(pr.Spec.Parameters)
	if !set || err != nil {
		return time.Time{}, set, err
	}
	return pr.CreationTimestamp.Add(d), true, nil
}
