// Package customresources installs CustomResourceDefinitions from their
// manifests and waits until the API server serves them: the common part of
// provreq/crd and capacitybuffer/crd, for tests and the local demo
// (production clusters install the CRDs with the Helm chart). It must not
// import the autoscaling logic (core/, scaleup/, ...).
package customresources
