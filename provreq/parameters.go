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
)

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
	raw, ok := params[ParamValidUntilSeconds]
	if !ok {
		return 0, false, nil
	}
	s := string(raw)
	if s == "" {
		return 0, true, fmt.Errorf("parameter %s is empty", ParamValidUntilSeconds)
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, true, fmt.Errorf("parameter %s=%q: not a whole number of seconds", ParamValidUntilSeconds, s)
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > maxValidUntilSeconds {
		return 0, true, fmt.Errorf("parameter %s=%q: too large", ParamValidUntilSeconds, s)
	}
	if n == 0 {
		return 0, true, fmt.Errorf("parameter %s=%q: must be at least 1", ParamValidUntilSeconds, s)
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
