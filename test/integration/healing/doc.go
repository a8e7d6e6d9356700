// Package healing tests, against the real local control plane and binary, node healing (fence, delete,
// replace) and the cleanup of broken instances.
package healing
