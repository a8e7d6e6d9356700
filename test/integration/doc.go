// Package integration holds tests that run against the real local control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok)
// and, where they need it, the real cluster-autoscaler binary.
package integration
