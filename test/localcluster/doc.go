// Package localcluster starts a real Kubernetes control plane on 127.0.0.1:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which
// fakes kubelets), from the binaries hack/build-tools.sh builds into
// _output/bin. Tests, `make demo` and hack/local-up.sh all use it. It listens
// on loopback only and never sends traffic elsewhere.
package localcluster
