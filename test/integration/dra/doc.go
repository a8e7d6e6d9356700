// Package dra tests, against the real local control plane and binary, dynamic resource allocation:
// claims, device classes and ResourceSlices through scale-up and scale-down.
package dra
