package cloudprovider

import "errors"

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
)
