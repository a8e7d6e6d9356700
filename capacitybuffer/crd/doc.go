// Package crd ships the CapacityBuffer CustomResourceDefinition that
// hack/update-codegen.sh generates from capacitybuffer/apis (embedded, so
// binaries and tests need no file on disk) and installs it into a cluster,
// for tests and the local demo; production clusters install it with the
// Helm chart. It must not import the autoscaling logic (core/, scaleup/, ...).
package crd
