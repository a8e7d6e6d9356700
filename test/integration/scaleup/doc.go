// Package scaleup tests, against the real local control plane and binary, scale-up: choice of groups,
// templates, back-off, limits, expanders, the status ConfigMap and a fork of package main.
package scaleup
