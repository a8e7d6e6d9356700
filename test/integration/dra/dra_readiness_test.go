package dra

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// groupRegistered reads the status ConfigMap's registered node counts of
// group; ok is false while the status or the group is not written yet.
func groupRegistered(ctx context.Context, e *framework.Env, group string) (clusterstate.RegisteredStat, bool, error) {
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, "cluster-autoscaler-status", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return clusterstate.RegisteredStat{}, false, nil
	}
	if err != nil {
		return clusterstate.RegisteredStat{}, false, err
	}
	var st clusterstate.Status
	if err := yaml.Unmarshal([]byte(cm.Data[clusterstate.StatusDataKey]), &st); err != nil {
		return clusterstate.RegisteredStat{}, false, err
	}
	for _, g := range st.NodeGroups {
		if g.Name == group {
			return g.Health.NodeCounts.Registered, true, nil
		}
	}
	return clusterstate.RegisteredStat{}, false, nil
}

// publishedSlices counts the ResourceSlices of driver.
func publishedSlices(ctx context.Context, e *framework.Env, driver string) (int, error) {
	list, err := e.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sl := range list.Items {
		if sl.Spec.Driver == driver {
			n++
		}
	}
	return n, nil
}

// TestDRALateSlicesNoSecondScaleUp: the GPU group's nodes (2 devices each)
// publish their ResourceSlices 20 s after they appear, as DRA drivers that
// start late. 4 pods with a one-device claim each get exactly 2 nodes:
// while the nodes are Ready without devices they count as not started
// (upcoming, with their template's devices), not as ready nodes that fit
// nothing, so no second scale-up; the status ConfigMap does not report
// them ready meanwhile.
func TestDRALateSlicesNoSecondScaleUp(t *testing.T) {
	e := framework.New(t)
	gpu, plain := framework.UniqueName("late"), framework.UniqueName("plain")
	driver := gpu + ".example.com"
	path := itest.WriteKwokGroups(e, itest.KwokGroup{Name: gpu, Driver: driver, Models: itest.Repeat("", 2), Faults: "{resourceSliceDelay: 20s}"},
		itest.KwokGroup{Name: plain, CPU: "32", Memory: "128Gi"})
	itest.DumpPods(e)
	itest.CreateDeviceClass(e, driver, driver)
	createGPUDeployment(e, "late", driver, 4)

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--expander=least-waste")...)
	// While no slice is published, the group's registered nodes are
	// reported not started, none ready.
	e.Eventually(90*time.Second, "the status ConfigMap reporting 2 registered nodes of "+gpu+" not ready while their slices are late",
		func(ctx context.Context) (bool, error) {
			reg, ok, err := groupRegistered(ctx, e, gpu)
			if err != nil || !ok {
				return false, err
			}
			if reg.Total == 2 && reg.Ready == 0 && reg.NotStarted == 2 {
				return true, nil
			}
			if n, err := publishedSlices(ctx, e, driver); err != nil || n > 0 {
				return false, fmt.Errorf("slices published (%d) before the status showed the nodes not ready; last counts %+v (err %v)",
					n, reg, err)
			}
			return false, nil
		})
	waitRunningWithClaims(e, 4, 180*time.Second, "all 4 pods Running with their claims allocated")
	if got := itest.NodesPerPool(e); got[gpu] != 2 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:2 (no second scale-up while the slices were late) and no %s node", got, gpu, plain)
	}
	e.Eventually(30*time.Second, "the status ConfigMap reporting the 2 nodes ready once their slices are published",
		func(ctx context.Context) (bool, error) {
			reg, ok, err := groupRegistered(ctx, e, gpu)
			return ok && reg.Ready == 2, err
		})
	// Several more loops (scan interval 1s) must not add anything.
	time.Sleep(4 * time.Second)
	if again := itest.NodesPerPool(e); again[gpu] != 2 || again[plain] != 0 {
		t.Errorf("nodes changed after the pods ran: %v", again)
	}
	if !p.Log.Written("Node ready but its devices are not") {
		t.Error("the autoscaler never logged a node whose devices were late")
	}
}

// TestDRALateSlicesOfAGroupTemplatedFromItsNodes: a group without a
// provider template (fromNodes) whose new nodes publish their 2 devices
// 20 s late. Its first node publishes 2 and holds 2 of 4 one-device pods;
// the other 2 get one new node, which, Ready without devices, is expected
// to publish as many as its peer: not started (so reported in the status,
// and not the node the group's template is copied from), so no second
// scale-up.
func TestDRALateSlicesOfAGroupTemplatedFromItsNodes(t *testing.T) {
	e := framework.New(t)
	group := framework.UniqueName("copied")
	driver := group + ".example.com"
	path := itest.WriteKwokGroups(e, itest.KwokGroup{Name: group, Driver: driver, Models: itest.Repeat("", 2), FromNodes: true,
		Faults: "{resourceSliceDelay: 20s}"})
	itest.DumpPods(e)
	itest.CreateDeviceClass(e, driver, driver)
	gpuGroupNode(e, group, group+"-first", driver, 2)
	createGPUDeployment(e, "late", driver, 4)
	e.Eventually(60*time.Second, "2 pods Running on the first node", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})

	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path)...)
	e.Eventually(90*time.Second, "the status ConfigMap reporting the new node of "+group+" not started while its slices are late",
		func(ctx context.Context) (bool, error) {
			reg, ok, err := groupRegistered(ctx, e, group)
			if err != nil || !ok {
				return false, err
			}
			if reg.Total == 2 && reg.Ready == 1 && reg.NotStarted == 1 {
				return true, nil
			}
			if n, err := publishedSlices(ctx, e, driver); err != nil || n > 1 {
				return false, fmt.Errorf("the new node's slice published before the status showed it not started; last counts %+v (err %v)",
					reg, err)
			}
			return false, nil
		})
	waitRunningWithClaims(e, 4, 180*time.Second, "all 4 pods Running with their claims allocated")
	time.Sleep(4 * time.Second) // a few more loops: no second scale-up
	if got := itest.NodesPerPool(e)[group]; got != 2 {
		t.Errorf("%d nodes in the group, want 2 (the first and one new)", got)
	}
	if n := strings.Count(p.Log.String(), `"Scaled up node group"`); n != 1 {
		t.Errorf("%d scale-ups, want one", n)
	}
	if !p.Log.Written("Node ready but its devices are not") {
		t.Error("the autoscaler never logged the new node's late devices")
	}
}
