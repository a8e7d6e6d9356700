package healing

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// twoGroupConfig writes a config of a healthy group and a broken one (the
// broken group's faults and min size given), 4 CPU each.
func twoGroupConfig(e *framework.Env, good, broken string, brokenMin int, brokenFaults string) string {
	return itest.WriteKwokConfig(e, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  minSize: %[5]d
  maxSize: 10
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {%[6]s}
`, good, broken, framework.TestNamespaceLabel, e.Namespace, brokenMin, brokenFaults))
}

// TestNeverRegisteredInstanceIsDeletedByName: an instance whose Node never
// appears is deleted, by name, once --max-node-provision-time has passed;
// the healthy group's nodes are not touched.
func TestNeverRegisteredInstanceIsDeletedByName(t *testing.T) {
	e := framework.New(t)
	good, ghost := framework.UniqueName("good"), framework.UniqueName("ghost")
	path := twoGroupConfig(e, good, ghost, 0, "neverRegisterRate: 1")
	itest.DumpPods(e)
	itest.CreatePods(e, "web", 8, "1", map[string]string{"pool": good})
	itest.CreatePods(e, "lost", 2, "1", map[string]string{"pool": ghost})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--max-node-provision-time=4s")...)
	e.Eventually(30*time.Second, "the 8 good pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	before := itest.NodeNames(e, good)
	e.Eventually(30*time.Second, "the ghost instance deleted", func(context.Context) (bool, error) {
		return p.Log.Contains(`"Deleted broken instance"`) && p.Log.Contains(`reason="unregistered"`), nil
	})
	if !p.Log.Written(`nodeGroup="` + ghost + `"`) {
		t.Error("the deletion does not name the ghost group")
	}
	if strings.Contains(itest.KwokInstances(e), ghost) {
		t.Errorf("the ghost instance is still in the provider's state: %s", itest.KwokInstances(e))
	}
	if after := itest.NodeNames(e, good); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Errorf("the good group's nodes changed: %v -> %v", before, after)
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, `cluster_autoscaler_deleted_nodes_total{reason="unregistered"} 1`) ||
		!strings.Contains(body, "cluster_autoscaler_old_unregistered_nodes_removed_count 1") {
		t.Error("/metrics does not count the deletion")
	}
	if !p.Log.Written("Nodes of a scale-up did not register in time") {
		t.Error("the scale-up timeout is not logged")
	}
}

// TestMinSizeKeepsBrokenInstanceUnlessForced: a group at its min size keeps
// its never-registered instance; with --force-delete-unregistered-nodes it
// goes.
func TestMinSizeKeepsBrokenInstanceUnlessForced(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("force=%v", force), func(t *testing.T) {
			e := framework.New(t)
			good, ghost := framework.UniqueName("good"), framework.UniqueName("ghost")
			path := twoGroupConfig(e, good, ghost, 1, "neverRegisterRate: 1")
			itest.CreatePods(e, "lost", 1, "1", map[string]string{"pool": ghost})
			args := itest.ScaleUpArgs(e, path, "--max-node-provision-time=3s")
			if force {
				args = append(args, "--force-delete-unregistered-nodes")
			}
			p := itest.StartAutoscaler(t, "autoscaler", args...)
			e.Eventually(30*time.Second, "the instance created", func(context.Context) (bool, error) {
				return strings.Contains(itest.KwokInstances(e), ghost), nil
			})
			if !force {
				e.Eventually(30*time.Second, "the broken instance kept", func(context.Context) (bool, error) {
					return p.Log.Contains("Keeping broken instances: the node group is at its minimum size"), nil
				})
				if p.Log.Contains(`"Deleted broken instance"`) || !strings.Contains(itest.KwokInstances(e), ghost) {
					t.Error("an instance of a group at its minimum was deleted")
				}
				return
			}
			e.Eventually(30*time.Second, "the broken instance deleted", func(context.Context) (bool, error) {
				return p.Log.Contains(`"Deleted broken instance"`) && !strings.Contains(itest.KwokInstances(e), ghost), nil
			})
		})
	}
}

// TestProviderIDMismatchTripsTheBreaker: the group's Nodes register under
// a provider ID that matches none of its instances, so every instance looks
// unregistered; the autoscaler deletes none of them and says why.
func TestProviderIDMismatchTripsTheBreaker(t *testing.T) {
	e := framework.New(t)
	good, odd := framework.UniqueName("good"), framework.UniqueName("odd")
	path := twoGroupConfig(e, good, odd, 0, "registrationDelay: 1s, foreignProviderID: true")
	itest.CreatePods(e, "web", 12, "1", map[string]string{"pool": odd}) // three nodes
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--max-node-provision-time=3s")...)
	e.Eventually(60*time.Second, "the breaker open", func(context.Context) (bool, error) {
		return p.Log.Contains("Unregistered-instance circuit breaker open"), nil
	})
	time.Sleep(3 * time.Second)
	if p.Log.Contains(`"Deleted broken instance"`) {
		t.Error("instances were deleted although the breaker was open")
	}
	if got := len(itest.NodeNames(e, odd)); got != 3 {
		t.Errorf("%d nodes of the odd group, want its 3 untouched", got)
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, "cluster_autoscaler_unregistered_nodes_deletion_blocked 1") {
		t.Error("/metrics does not show the open breaker")
	}
	events, err := e.Client.CoreV1().Events(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ev := range events.Items {
		found = found || ev.Reason == "DeleteUnregisteredBlocked"
	}
	if !found {
		t.Error("no DeleteUnregisteredBlocked event")
	}
}

// TestTimedOutScaleUpIsRevertedBeforeItsLateNode: the instance would
// register after 12 s, the provision time is 3 s: the scale-up times out,
// the instance is deleted by name, and its Node never appears.
func TestTimedOutScaleUpIsRevertedBeforeItsLateNode(t *testing.T) {
	e := framework.New(t)
	good, slow := framework.UniqueName("good"), framework.UniqueName("slow")
	path := twoGroupConfig(e, good, slow, 0, "registrationDelay: 12s")
	itest.CreatePods(e, "web", 1, "1", map[string]string{"pool": slow})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--max-node-provision-time=3s")...)
	e.Eventually(30*time.Second, "the timeout and the deletion", func(context.Context) (bool, error) {
		return p.Log.Contains("Nodes of a scale-up did not register in time") && p.Log.Contains(`"Deleted broken instance"`), nil
	})
	time.Sleep(12 * time.Second) // past the registration delay
	if got := itest.NodeNames(e, slow); len(got) != 0 {
		t.Errorf("the late instance's Node appeared: %v", got)
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, `cluster_autoscaler_failed_scale_ups_total{dra_drivers="",gpu_name="",gpu_resource_name="",reason="timeout"} 1`) {
		t.Error("/metrics does not count the timed-out scale-up")
	}
}

// TestDryRunDeletesNothing: with --dry-run-deletions the never-registered
// instance is only logged.
func TestDryRunDeletesNothing(t *testing.T) {
	e := framework.New(t)
	good, ghost := framework.UniqueName("good"), framework.UniqueName("ghost")
	path := twoGroupConfig(e, good, ghost, 0, "neverRegisterRate: 1")
	itest.CreatePods(e, "lost", 1, "1", map[string]string{"pool": ghost})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--max-node-provision-time=3s", "--dry-run-deletions")...)
	e.Eventually(30*time.Second, "the dry-run line", func(context.Context) (bool, error) {
		return p.Log.Contains("Dry run: would delete instance"), nil
	})
	time.Sleep(2 * time.Second)
	if p.Log.Contains(`"Deleted broken instance"`) || !strings.Contains(itest.KwokInstances(e), ghost) {
		t.Error("a dry run deleted the instance")
	}
}
