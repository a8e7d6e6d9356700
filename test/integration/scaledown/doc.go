// Package scaledown tests, against the real local control plane and binary, scale-down: unneeded
// nodes, drains, removal, rotation and volumes.
package scaledown
