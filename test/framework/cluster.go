package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/localcluster"
)

// ClusterOptions shape a private control plane (see NewCluster).
type ClusterOptions struct {
	// NodeLeaseSeconds is kwok's node lease duration (default 40; the
	// reference measurements use 240 for thousands of nodes, where renewals
	// at 40 s saturate the machine).
	NodeLeaseSeconds int
	// KwokParallelism is how many pod and node stages and leases kwok works
	// on at once (kwok's default: 4).
	KwokParallelism int
	// KwokIgnorePodLabel is a label key that makes kwok leave a pod's status
	// to the test (see localcluster.Config).
	KwokIgnorePodLabel string
}

// NewCluster starts a control plane of the test's own, rather than the
// package's shared one, for tests that fill a cluster (thousands of nodes)
// or need other component settings, and returns an Env on it. The control
// plane is stopped and its files removed when the test ends (its logs are
// kept when the test failed).
func NewCluster(t testing.TB, opts ClusterOptions) *Env {
	t.Helper()
	cfg, err := controlPlaneConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.NodeLeaseSeconds, cfg.KwokParallelism, cfg.KwokIgnorePodLabel = opts.NodeLeaseSeconds, opts.KwokParallelism,
		opts.KwokIgnorePodLabel
	start := time.Now()
	c, err := localcluster.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("starting a private control plane (logs in %s): %v", cfg.Dir, err)
	}
	t.Logf("private control plane healthy in %.1fs (%s)", time.Since(start).Seconds(), cfg.Dir)
	// Nothing is deleted object by object: the whole cluster goes.
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Logf("stopping the private control plane: %v", err)
		}
		if t.Failed() {
			t.Logf("private control-plane logs kept in %s", filepath.Join(cfg.Dir, "logs"))
			return
		}
		_ = os.RemoveAll(cfg.Dir)
	})
	return newEnv(t, c.Kubeconfig)
}
