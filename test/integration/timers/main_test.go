package timers

import (
	"os"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestMain starts the package's control plane; the autoscaler runs in the
// test process, so no binary is built.
func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }
