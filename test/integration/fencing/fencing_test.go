package fencing

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// secondCopyWatch watches the namespace's pods for a new pod named name (a
// UID other than first's) and checks, the moment it appears, that the
// machine the first copy ran on is gone (stands says whether it is; by
// default, whether its Node exists): a second copy while that machine may
// still run the first would be two copies of one StatefulSet pod at once.
type secondCopyWatch struct {
	mu        sync.Mutex
	second    *apiv1.Pod
	violation string
}

func watchSecondCopy(e *framework.Env, first *apiv1.Pod) *secondCopyWatch {
	return watchSecondCopyWhile(e, first, func(ctx context.Context) string {
		_, err := e.Client.CoreV1().Nodes().Get(ctx, first.Spec.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("node %s, which may still run the first, exists (get: %v)", first.Spec.NodeName, err)
	})
}

// watchSecondCopyWhile is watchSecondCopy with stands telling whether the
// first copy's machine may still stand ("" when it is gone for sure).
func watchSecondCopyWhile(e *framework.Env, first *apiv1.Pod, stands func(ctx context.Context) string) *secondCopyWatch {
	w := &secondCopyWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	e.T.Cleanup(cancel)
	wi, err := e.Client.CoreV1().Pods(e.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + first.Name, ResourceVersion: first.ResourceVersion})
	if err != nil {
		e.T.Fatal(err)
	}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*apiv1.Pod)
			if !ok || ev.Type == watch.Deleted || p.UID == first.UID {
				continue
			}
			standing := stands(ctx)
			w.mu.Lock()
			if w.second == nil {
				w.second = p.DeepCopy()
				if standing != "" {
					w.violation = fmt.Sprintf("a second %s (%s) was created while %s", p.Name, p.UID, standing)
				}
			}
			w.mu.Unlock()
			return
		}
	}()
	return w
}

// TestNodeHealingFencesAPartitionedNode: a StatefulSet pod with a zonal
// volume runs on a node that is cut off (NotReady, its pod still "Running"
// as far as anyone can tell). The heal replaces the node, but never lets the
// pod go while the machine may still run it: the node's instance is deleted
// by name first, and the second copy of the pod appears only once that node
// is gone; it then runs on the replacement with the same claim.
func TestNodeHealingFencesAPartitionedNode(t *testing.T) {
	fencePartitionedNode(t, "", "20s")
}

// TestNodeHealingFenceMatchesTheNodeAsItsProviderDoes: the same, on a
// cloud that writes the Nodes' provider IDs with the empty host
// (kwok:///<name>, as AWS's aws:///zone/id against aws://zone/id) and takes
// 60 s to terminate a deleted instance (longer than the pod garbage
// collector's 20 s period, so that it acts while the old machine stands).
// The fence must see the instance still listed, as the provider matches it
// to the Node: comparing the Node's provider ID byte for byte with the
// listed ids (the old fence) found no instance in the loop that deleted it,
// marked the node out of service, and the pod garbage collector let the
// second copy start while the first one's machine still ran.
func TestNodeHealingFenceMatchesTheNodeAsItsProviderDoes(t *testing.T) {
	fencePartitionedNode(t, "  faults: {nodeProviderIDSpelling: emptyHost, deletionDelay: 60s}\n", "90s")
}

// fencePartitionedNode runs the partitioned-node heal on a group with the
// given kwok faults; provision is --max-node-provision-time, which also
// bounds how long the heal waits for the deleted instance to go.
func fencePartitionedNode(t *testing.T, faults, provision string) {
	e := framework.New(t)
	itest.DumpPods(e)
	pool := framework.UniqueName("fence")
	zone := "zone-" + e.Namespace
	path := itest.WriteKwokConfig(e, fmt.Sprintf(`nodeGroups:
- name: %[1]s
  maxSize: 4
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s, %[4]s: %[5]s}
    capacity: {cpu: "2", memory: 8Gi, pods: "110"}
%[6]s`, pool, framework.TestNamespaceLabel, e.Namespace, itest.ZoneLabel, zone, faults))
	class := itest.ZonalStorage(e, zone, 1)
	itest.StatefulSet(e, "db", pool, class, 1, "1500m")
	itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e, path, "--node-healing-enabled",
		"--node-healing-policy=Ready=False:3s", "--node-healing-policy=Ready=Unknown:3s",
		"--max-pod-eviction-time=5s", "--max-node-provision-time="+provision)...)
	first := runningPod(e, "db-0")
	old := first.Spec.NodeName
	copies := watchSecondCopy(e, first)
	itest.PartitionNode(e, old)
	healedOnce(e, first, copies)
	if _, err := e.Client.CoreV1().Nodes().Get(e.Context(), old, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s still exists after its heal (get: %v)", old, err)
	}
}

// runningPod waits for the namespace's pod name to run on a node.
func runningPod(e *framework.Env, name string) *apiv1.Pod {
	e.T.Helper()
	var first *apiv1.Pod
	e.Eventually(120*time.Second, name+" Running", func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		first = p
		return p.Status.Phase == apiv1.PodRunning && p.Spec.NodeName != "", nil
	})
	return first
}

// healedOnce waits for the second copy of first to run on another node,
// fails on a second copy the watch saw too early, and waits for the heal
// of first's node to end with HealSucceeded.
func healedOnce(e *framework.Env, first *apiv1.Pod, copies *secondCopyWatch) {
	e.T.Helper()
	old := first.Spec.NodeName
	e.Eventually(240*time.Second, first.Name+" Running again on another node", func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.UID != first.UID && p.Status.Phase == apiv1.PodRunning && p.Spec.NodeName != old, nil
	})
	copies.mu.Lock()
	violation, second := copies.violation, copies.second
	copies.mu.Unlock()
	if violation != "" {
		e.T.Fatal(violation)
	}
	if second == nil {
		e.T.Fatalf("the watch never saw the second %s", first.Name)
	}
	e.Eventually(60*time.Second, "HealSucceeded on "+old, func(ctx context.Context) (bool, error) {
		ev, err := itest.NodeEvents(ctx, e, old)
		return err == nil && ev["HealSucceeded"] != "", err
	})
}
