package core

import (
	"errors"
	"fmt"

	"k8s.io/autoscaler/cluster-autoscaler/metrics"
)

// LoopError is an error that ended a loop, classified for errors_total.
type LoopError struct {
	Type metrics.ErrorType
	Err  error
}

func (e *LoopError) Error() string { return fmt.Sprintf("%s: %v", e.Type, e.Err) }
func (e *LoopError) Unwrap() error { return e.Err }

// NewLoopError classifies err as t.
func NewLoopError(t metrics.ErrorType, err error) *LoopError { return &LoopError{Type: t, Err: err} }

// errorType returns the classification of err; unclassified errors are internal.
func errorType(err error) metrics.ErrorType {
	var le *LoopError
	if errors.As(err, &le) {
		return le.Type
	}
	return metrics.InternalError
}
