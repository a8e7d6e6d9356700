package provreq

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestCheckCapacity: a request that fits is Provisioned and books its
// capacity, so a second one that would need the same room is not; noRetry
// fails at once; once the first request's pods are scheduled its booking is
// consumed and the second one fits on its next try.
func TestCheckCapacity(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	pool := framework.UniqueName("cc")
	for i := 0; i < 2; i++ {
		e.CreateNode(framework.MakeNode(fmt.Sprintf("%s-%d", pool, i)).Label("pool", pool).Obj())
	}
	other := framework.UniqueName("unused")
	path := itest.OneGroupConfig(e.Env, other, 1, "registrationDelay: 1s")
	sel := map[string]string{"pool": pool}

	e.Request("first", provreq.ClassCheckCapacity, nil, false, itest.PodSet{Name: "main", Count: 4, CPU: "1", Selector: sel})
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)
	first := e.Condition("first", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 30*time.Second)
	if !provreq.IsConditionTrue(first.Status.Conditions, provreq.ConditionAccepted) {
		t.Error("a provisioned request is not Accepted")
	}

	// 8 CPUs, 4 booked: six more pods do not fit.
	e.Request("second", provreq.ClassCheckCapacity, nil, false, itest.PodSet{Name: "main", Count: 6, CPU: "1", Selector: sel})
	e.Request("hopeless", provreq.LegacyClassCheckCapacity, map[string]string{"noRetry": "true"}, false,
		itest.PodSet{Name: "main", Count: 100, CPU: "1", Selector: sel})
	second := e.Condition("second", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 30*time.Second)
	if msg := provreq.FindCondition(second.Status.Conditions, provreq.ConditionProvisioned).Message; !strings.Contains(msg, "next check") {
		t.Errorf("the waiting message %q does not say when the next check is", msg)
	}
	e.Condition("hopeless", provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound, 30*time.Second)

	// The first request's workload runs: its booking is consumed, and the
	// second request now fits (8 CPUs, 4 used by consumers, 6 wanted: no;
	// so make the second need only what is left after it is retried).
	e.Consumers("first", 4, "1", sel)
	e.Condition("first", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, 60*time.Second)
	// Still 6 > 4 free: the second stays not provisioned across retries.
	time.Sleep(5 * time.Second)
	second = e.Condition("second", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, time.Second)
	// Free the room: the workload ends; the second request fits at its next check.
	if err := e.Client.CoreV1().Pods(e.Namespace).DeleteCollection(e.Context(), metav1.DeleteOptions{
		GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Condition("second", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 60*time.Second)
	_ = second
}

// TestAtomicScaleUp: one request pinned to one group gets one node; a
// second that neither group can hold alone is split over both in one loop;
// both become Provisioned when their nodes register, name their node
// groups, and their consuming pods run on the new nodes.
func TestAtomicScaleUp(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	a, b, shape := framework.UniqueName("a"), framework.UniqueName("b"), framework.UniqueName("shape")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 2s}
- name: %[2]s
  maxSize: 3
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 2s}
`, a, b, framework.TestNamespaceLabel, e.Namespace, shape))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e.Env, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", a)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Request("single", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 4, CPU: "1", Selector: map[string]string{"pool": b}})
	// 16 one-CPU pods: four nodes; a holds 2, b has 2 left after "single".
	e.Request("split", provreq.LegacyClassAtomicScaleUp, nil, false,
		itest.PodSet{Name: "driver", Count: 4, CPU: "1", Selector: map[string]string{"shape": shape}},
		itest.PodSet{Name: "workers", Count: 12, CPU: "1", Selector: map[string]string{"shape": shape}})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)

	single := e.Condition("single", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	if got := single.Status.ProvisioningClassDetails["nodeGroups"]; string(got) != b {
		t.Errorf("single's nodeGroups detail = %q, want %q", got, b)
	}
	split := e.Condition("split", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	groups := string(split.Status.ProvisioningClassDetails["nodeGroups"])
	if !strings.Contains(groups, a) || !strings.Contains(groups, b) {
		t.Errorf("split's nodeGroups detail = %q, want both %s and %s", groups, a, b)
	}
	if got := itest.NodesPerPool(e.Env); got[a] != 2 || got[b] != 3 {
		t.Errorf("nodes per group = %v, want %s:2 %s:3", got, a, b)
	}
	if !p.Log.Written("Scaled up for a ProvisioningRequest") {
		t.Error("no atomic scale-up logged")
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if want := `cluster_autoscaler_scaled_up_nodes_total{dra_drivers="",gpu_name="",gpu_resource_name=""} 5`; !strings.Contains(body, want) {
		t.Errorf("/metrics lacks %q: atomic scale-ups count as scale-ups", want)
	}

	// The workloads arrive: kube-scheduler puts them on the new nodes, and
	// their bookings end as consumed.
	e.Consumers("single", 4, "1", map[string]string{"pool": b})
	e.Consumers("split", 16, "1", map[string]string{"shape": shape})
	e.Eventually(60*time.Second, "all 20 consuming pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e.Env, 20)
	})
	e.Condition("split", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, 30*time.Second)
	if got := itest.NodesPerPool(e.Env); got[a] != 2 || got[b] != 3 {
		t.Errorf("nodes per group after the pods ran = %v, want no more", got)
	}
}

// TestAtomicRollback: the second group of a split request is out of
// capacity, so the first group's new instances are deleted at once; and a
// request whose instances never register is rolled back after the provision
// time. No instance of either attempt is left behind.
func TestAtomicRollback(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	ok, stockout, ghost := framework.UniqueName("ok"), framework.UniqueName("stockout"), framework.UniqueName("ghost")
	shape := framework.UniqueName("shape")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s, shape: %[6]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  maxSize: 2
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s, shape: %[6]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, outOfCapacityAfter: 1}
- name: %[3]s
  maxSize: 10
  template:
    labels: {%[4]s: %[5]s, pool: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {neverRegisterRate: 1}
`, ok, stockout, ghost, framework.TestNamespaceLabel, e.Namespace, shape))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e.Env, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", ok)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// 16 CPUs: neither group holds four nodes; ok (preferred) gives 2,
	// stockout must give 2 but its cloud has 1.
	e.Request("split", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 16, CPU: "1", Selector: map[string]string{"shape": shape}})
	e.Request("never", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 4, CPU: "1", Selector: map[string]string{"pool": ghost}})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path, "--max-node-provision-time=5s")...)

	e.Condition("split", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 30*time.Second)
	e.Eventually(30*time.Second, "the split attempt rolled back", func(context.Context) (bool, error) {
		return p.Log.Contains("a later increase of the same request failed"), nil
	})
	never := e.Condition("never", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 60*time.Second)
	msg := provreq.FindCondition(never.Status.Conditions, provreq.ConditionProvisioned).Message
	if !strings.Contains(msg, "rolled back") || !strings.Contains(msg, "not ready within") {
		t.Errorf("never's message %q does not explain the rollback", msg)
	}
	if !p.Log.Written("Deleted instance of a rolled back all-or-nothing scale-up") {
		t.Error("the rolled back instances are not logged by name")
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, `cluster_autoscaler_deleted_nodes_total{reason="atomic-rollback"}`) ||
		strings.Contains(body, `cluster_autoscaler_deleted_nodes_total{reason="atomic-rollback"} 0`) {
		t.Error("/metrics does not count the rolled back instances")
	}
	// Nothing of either attempt is left: no nodes in ok, and the kwok
	// state holds no instance of ghost.
	time.Sleep(2 * time.Second)
	if got := itest.NodesPerPool(e.Env); got[ok] != 0 || got[stockout] != 0 || got[ghost] != 0 {
		t.Errorf("nodes left behind: %v", got)
	}
	state, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), "kwok-provider-state", metav1.GetOptions{})
	if err == nil && strings.Contains(state.Data["instances"], ghost) {
		// A retry may have created new ghost instances after the rollback;
		// they must not be the rolled back ones, which the log names.
		t.Logf("kwok state after the rollback: %s", state.Data["instances"])
	}
}

// TestAtomicRefusedAndExpired: a request larger than its group's max fails
// at once (it can never fit); one that cannot fit now retries until its
// ValidUntilSeconds and then fails as expired.
func TestAtomicRefusedAndExpired(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	small, full := framework.UniqueName("small"), framework.UniqueName("full")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
- name: %[2]s
  maxSize: 5
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {outOfCapacityAfter: 1}
`, small, full, framework.TestNamespaceLabel, e.Namespace))
	e.Request("too-big", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 40, CPU: "1", Selector: map[string]string{"pool": small}})
	// full's cloud has one instance, the request needs two: every
	// all-or-nothing attempt is refused.
	e.Request("short-lived", provreq.ClassBestEffortAtomicScaleUp, map[string]string{"ValidUntilSeconds": "6",
		"maxRunDurationSeconds": "600"}, false,
		itest.PodSet{Name: "main", Count: 8, CPU: "1", Selector: map[string]string{"pool": full}})
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)

	big := e.Condition("too-big", provreq.ConditionFailed, metav1.ConditionTrue, "CapacityCanNeverFit", 30*time.Second)
	if msg := provreq.FindCondition(big.Status.Conditions, provreq.ConditionFailed).Message; !strings.Contains(msg, "never") {
		t.Errorf("too-big's message %q does not say it can never fit", msg)
	}
	e.Condition("short-lived", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 30*time.Second)
	e.Condition("short-lived", provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired, 30*time.Second)
	if got := itest.NodesPerPool(e.Env); got[small] != 0 || got[full] != 0 {
		t.Errorf("nodes were added: %v", got)
	}
}

// TestProvisionedCapacityRevokedAndOtherLifecycle: deleting a provisioned
// node revokes the request; a PodTemplate created late is waited for while
// one that never comes fails the request; a request of another class is not
// touched; pods consuming a missing request scale up like any pod.
func TestProvisionedCapacityRevokedAndOtherLifecycle(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	group := framework.UniqueName("g")
	path := itest.OneGroupConfig(e.Env, group, 10, "registrationDelay: 1s")
	sel := map[string]string{"pool": group}
	e.Request("revoked", provreq.ClassBestEffortAtomicScaleUp, nil, false, itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	e.Request("late-template", provreq.ClassBestEffortAtomicScaleUp, nil, true, itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: sel})
	e.Request("no-template", provreq.ClassCheckCapacity, nil, true, itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: sel})
	e.Request("foreign", "queued-provisioning.gke.io", nil, false, itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: sel})
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)

	e.Condition("late-template", provreq.ConditionProvisioned, metav1.ConditionFalse, "WaitingForPodTemplates", 20*time.Second)
	e.Template("late-template", itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: sel})
	e.Condition("late-template", provreq.ConditionProvisioned, metav1.ConditionTrue, "", 60*time.Second)
	e.Condition("no-template", provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonFailedToCreatePods, 30*time.Second)

	e.Condition("revoked", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	nodes, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + group})
	if err != nil || len(nodes.Items) == 0 {
		t.Fatalf("no nodes of %s: %v", group, err)
	}
	for _, n := range nodes.Items {
		if err := e.Client.CoreV1().Nodes().Delete(e.Context(), n.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.Condition("revoked", provreq.ConditionCapacityRevoked, metav1.ConditionTrue, "CapacityLost", 30*time.Second)

	// A pod consuming a request that does not exist is an ordinary pending pod.
	e.Consumers("missing-request", 1, "1", sel)
	e.Eventually(60*time.Second, "the orphan consumer Running", func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, "missing-request-worker-0", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == apiv1.PodRunning, nil
	})

	foreign, err := e.PRs.Get(e.Context(), "foreign", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(foreign.Status.Conditions) != 0 {
		t.Errorf("a request of an unknown class got conditions: %v", foreign.Status.Conditions)
	}
}

// TestAtomicAttemptDeletedOrListedLate: a request deleted during its
// scale-up has the instances the cloud has not created yet cancelled (its
// slow group's), while those created (its quick group's) are left to
// scale-down, which removes them once they registered empty; a cloud that
// lists new instances late does not make its request Provisioned early.
func TestAtomicAttemptDeletedOrListedLate(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	slow, quick, late := framework.UniqueName("slow"), framework.UniqueName("quick"), framework.UniqueName("late")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 4
  template:
    labels: {%[4]s: %[5]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 10m, listingDelay: 40s}
- name: %[2]s
  maxSize: 4
  template:
    labels: {%[4]s: %[5]s, pool: %[2]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 5s}
- name: %[3]s
  maxSize: 4
  template:
    labels: {%[4]s: %[5]s, pool: %[3]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 6s, listingDelay: 4s}
`, slow, quick, late, framework.TestNamespaceLabel, e.Namespace))
	e.Request("deleted", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "a", Count: 2, CPU: "3", Selector: map[string]string{"pool": slow}},
		itest.PodSet{Name: "b", Count: 2, CPU: "3", Selector: map[string]string{"pool": quick}})
	e.Request("listed-late", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: map[string]string{"pool": late}})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path, "--scale-down-unneeded-time=2s",
		"--scale-down-delay-after-add=0s")...)

	e.Condition("deleted", provreq.ConditionProvisioned, metav1.ConditionFalse, "ProvisioningInProgress", 60*time.Second)
	e.Eventually(30*time.Second, "the quick group's two instances in the kwok state", func(context.Context) (bool, error) {
		return strings.Count(itest.KwokInstances(e.Env), quick+"-") == 2, nil
	})
	if err := e.PRs.Delete(e.Context(), "deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the deleted request's instances not created yet cancelled", func(context.Context) (bool, error) {
		return p.Log.Contains("ProvisioningRequest deleted during its scale-up") &&
			p.Log.Contains("Cancelled the instances of a deleted request's scale-up not created yet") &&
			!strings.Contains(itest.KwokInstances(e.Env), slow+"-"), nil
	})
	if p.Log.Contains("Rolled back an all-or-nothing scale-up") {
		t.Error("the deleted request's scale-up was rolled back whole; its created instances are scale-down's")
	}

	// Provisioned only with its nodes registered, never before.
	pr := e.Condition("listed-late", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 90*time.Second)
	if got := itest.NodesPerPool(e.Env); got[late] != 2 {
		t.Errorf("listed-late is Provisioned (%s) with %d nodes in %s, want 2",
			provreq.FindCondition(pr.Status.Conditions, provreq.ConditionProvisioned).Message, got[late], late)
	}
	// The quick group's nodes registered empty and scale-down removes them.
	var lastNodes map[string]int
	var lastState string
	defer func() {
		if t.Failed() {
			t.Logf("last seen: nodes per pool %v; kwok provider state %s", lastNodes, lastState)
		}
	}()
	e.Eventually(90*time.Second, "the deleted request's registered nodes scaled down", func(context.Context) (bool, error) {
		lastNodes, lastState = itest.NodesPerPool(e.Env), itest.KwokInstances(e.Env)
		return lastNodes[quick] == 0 && !strings.Contains(lastState, quick+"-"), nil
	})
	if got := itest.NodesPerPool(e.Env); got[slow] != 0 {
		t.Errorf("%d nodes of the deleted request's slow group, want none", got[slow])
	}
}

// TestConsumersOfForeignRequestsDoNotScaleUp: pods consuming a request
// handled by another processor instance or of an unknown class are set
// aside (the current and the deprecated annotation key); an ordinary pod,
// in the same loop, still scales up. The ordinary pod goes to a group of its
// own: on a node of the consumers' group the scheduler could give the
// ordinary pod's node to a consumer (it takes pending pods oldest first).
func TestConsumersOfForeignRequestsDoNotScaleUp(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	group, ordinary := framework.UniqueName("g"), framework.UniqueName("ordinary")
	path := itest.GroupsConfig(e.Env, group, ordinary)
	sel := map[string]string{"pool": group}
	e.Request("elsewhere", provreq.ClassCheckCapacity, map[string]string{"processorInstance": "other-autoscaler"}, false,
		itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	e.Request("gke", "queued-provisioning.gke.io", nil, false, itest.PodSet{Name: "main", Count: 1, CPU: "3", Selector: sel})
	e.Consumers("elsewhere", 2, "3", sel)
	old := framework.MakePod(e.Namespace, "old-key-worker").Req("3", "100Mi").NodeSelector("pool", group).Obj()
	old.Annotations = map[string]string{provreq.DeprecatedConsumeAnnotation: "gke"}
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), old, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.CreatePods(e.Env, "ordinary", 1, "3", map[string]string{"pool": ordinary})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)

	e.Eventually(90*time.Second, "the ordinary pod Running", func(ctx context.Context) (bool, error) {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, "ordinary-0", metav1.GetOptions{})
		return err == nil && pod.Status.Phase == apiv1.PodRunning, nil
	})
	e.Eventually(30*time.Second, "the consumers set aside in the log", func(context.Context) (bool, error) {
		return strings.Count(p.Log.String(), "Pod consumes a ProvisioningRequest handled elsewhere") >= 6, nil
	})
	if got := itest.NodesPerPool(e.Env); got[group] != 0 || got[ordinary] != 1 {
		t.Errorf("nodes %v, want none in %s (the consumers of foreign requests must not be scaled up for) and 1 in %s",
			got, group, ordinary)
	}
	for _, name := range []string{"elsewhere-worker-0", "elsewhere-worker-1", "old-key-worker"} {
		pod, err := e.Client.CoreV1().Pods(e.Namespace).Get(e.Context(), name, metav1.GetOptions{})
		if err != nil || pod.Spec.NodeName != "" {
			t.Errorf("consumer %s scheduled or missing (%v)", name, err)
		}
	}
	// Upstream's event on each consumer: Normal, no reason.
	for pod, request := range map[string]string{"elsewhere-worker-0": "elsewhere", "elsewhere-worker-1": "elsewhere",
		"old-key-worker": "gke"} {
		want := fmt.Sprintf("Unschedulable pod didn't trigger scale-up, because it's consuming ProvisioningRequest %s/%s",
			e.Namespace, request)
		e.Eventually(30*time.Second, "the consuming-pod event on "+pod, func(ctx context.Context) (bool, error) {
			msgs, err := itest.PodEventMessages(ctx, e.Env, pod, "")
			return err == nil && slices.Contains(msgs, want), err
		})
	}
	for _, name := range []string{"elsewhere", "gke"} {
		pr, err := e.PRs.Get(e.Context(), name, metav1.GetOptions{})
		if err != nil || len(pr.Status.Conditions) != 0 {
			t.Errorf("request %s of someone else touched: %v (%v)", name, pr.Status.Conditions, err)
		}
	}
}

// TestHugeProvisioningRequestFails: a request for two billion pods fails at
// once with TooManyPods and an event, and neither the ordinary pods nor a
// small request waiting behind it are held up.
func TestHugeProvisioningRequestFails(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	group := framework.UniqueName("g")
	path := itest.OneGroupConfig(e.Env, group, 10, "registrationDelay: 1s")
	sel := map[string]string{"pool": group}
	e.Request("huge", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "a", Count: 2_000_000_000, CPU: "1", Selector: sel}, itest.PodSet{Name: "b", Count: 147_483_647, CPU: "1", Selector: sel})
	time.Sleep(1100 * time.Millisecond) // the small one is younger: processed after the huge one
	e.Request("small", provreq.ClassBestEffortAtomicScaleUp, nil, false, itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	itest.CreatePods(e.Env, "ordinary", 2, "3", sel)
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)

	huge := e.Condition("huge", provreq.ConditionFailed, metav1.ConditionTrue, "TooManyPods", 60*time.Second)
	if msg := provreq.FindCondition(huge.Status.Conditions, provreq.ConditionFailed).Message; !strings.Contains(msg, "2147483647") ||
		!strings.Contains(msg, "50000") {
		t.Errorf("huge's message %q does not give its count and the cap", msg)
	}
	e.Condition("small", provreq.ConditionProvisioned, metav1.ConditionTrue, "", 90*time.Second)
	e.Eventually(90*time.Second, "the ordinary pods Running", func(ctx context.Context) (bool, error) {
		pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running := 0
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, "ordinary-") && p.Status.Phase == apiv1.PodRunning {
				running++
			}
		}
		return running == 2, nil
	})
	e.Eventually(30*time.Second, "a warning event on the huge request", func(ctx context.Context) (bool, error) {
		events, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.InvolvedObject.Name == "huge" && ev.Type == apiv1.EventTypeWarning && ev.Reason == "FailedTooManyPods" {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestTemplateStartupTaintsAreIgnored: a group whose nodes boot with a
// start-up taint (removed by an agent once the node is set up) serves an
// all-or-nothing request and ordinary pods; the template's taint is not
// simulated as permanent.
func TestTemplateStartupTaintsAreIgnored(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	pool := framework.UniqueName("booting")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 4
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    taints: [{key: startup-taint.cluster-autoscaler.kubernetes.io/cni, value: "true", effect: NoSchedule}]
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
`, pool, framework.TestNamespaceLabel, e.Namespace))
	sel := map[string]string{"pool": pool}
	e.Request("booting", provreq.ClassBestEffortAtomicScaleUp, nil, false, itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	itest.CreatePods(e.Env, "web", 1, "3", sel)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)
	e.Condition("booting", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	itest.PodEvent(e.Env, "TriggeredScaleUp", pool)
	// The agent removes the taint from the new nodes; the ordinary pod runs.
	e.Eventually(60*time.Second, "the ordinary pod Running once the nodes lost their start-up taint", func(ctx context.Context) (bool, error) {
		nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + pool})
		if err != nil {
			return false, err
		}
		for i := range nodes.Items {
			n := &nodes.Items[i]
			if len(n.Spec.Taints) == 0 {
				continue
			}
			n.Spec.Taints = nil
			if _, err := e.Client.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
				return false, nil // a conflict with kwok's status updates: next poll
			}
		}
		return itest.AllRunning(ctx, e.Env, 1)
	})
	if p.Log.Contains(provreq.ReasonCapacityIsNotFound) || p.Log.Contains("CapacityCanNeverFit") {
		t.Error("the request was refused for the template's start-up taint")
	}
}
