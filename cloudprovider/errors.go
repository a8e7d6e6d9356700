package cloudprovider

import (
	"context"
	"errors"
	"fmt"
	"net"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Errors a provider returns; callers classify them with errors.Is.
var (
	// ErrNotImplemented says an optional method is not provided; the caller
	// uses the documented fallback.
	ErrNotImplemented = errors.New("not implemented")
	// ErrAlreadyExist says a node group to create exists already.
	ErrAlreadyExist = errors.New("already exists")
	// ErrIllegalConfiguration says the provider does not allow the request.
	ErrIllegalConfiguration = errors.New("configuration not allowed by cloud provider")
	// ErrUnknownProvider says --cloud-provider names no registered provider.
	ErrUnknownProvider = errors.New("unknown cloud provider")
	// ErrTransient marks a failure that says nothing about the node group:
	// a write conflict, a timeout, an API briefly unavailable or throttling.
	// The same call may succeed when repeated; a provider wraps it with %w
	// only when the failed call changed nothing.
	ErrTransient = errors.New("transient error")
)

// ScaleUpError is a size increase the cloud refused for a reason of its own:
// no capacity, a quota, a request it does not allow. Class and Code are
// those an instance's InstanceErrorInfo would carry (Code e.g. "STOCKOUT",
// "QUOTA_EXCEEDED"); the autoscaler backs the group off with them.
type ScaleUpError struct {
	Class InstanceErrorClass
	Code  string
	Err   error
}

// Error implements error.
func (e *ScaleUpError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("%s (%s)", e.Code, e.Class)
	}
	return fmt.Sprintf("%s (%s): %v", e.Code, e.Class, e.Err)
}

// Unwrap returns the underlying error.
func (e *ScaleUpError) Unwrap() error { return e.Err }

// NewOutOfResourcesError is a ScaleUpError of class OutOfResources (a
// stock-out or an exhausted quota) with the cloud's code.
func NewOutOfResourcesError(code string, err error) *ScaleUpError {
	return &ScaleUpError{Class: OutOfResourcesErrorClass, Code: code, Err: err}
}

// IsTransient reports whether err is a failure worth repeating at once
// rather than a verdict on the node group: ErrTransient, a conflict,
// throttling, a timeout or an unavailable API server, a network timeout,
// or the caller's context ending. A ScaleUpError never is, whatever it wraps:
// the cloud has spoken.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var su *ScaleUpError
	if errors.As(err, &su) {
		return false
	}
	if errors.Is(err, ErrTransient) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	if apierrors.IsConflict(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		apierrors.IsUnexpectedServerError(err) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
