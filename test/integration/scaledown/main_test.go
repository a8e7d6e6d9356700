package scaledown

import (
	"os"
	"testing"

	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

func TestMain(m *testing.M) { os.Exit(itest.Main(m)) }
