package awsfake

import (
	"os"
	"testing"

	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestMain starts the local control plane for the kubelet player's
// integration test; the other tests of the package only use the fake.
func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
