package faults

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/clusterstate"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// The failover tests run two replicas with leader election, SIGKILL the
// leader in the middle of some work and check what the new leader makes of
// it. Lease timings are short by default; FAILOVER_LEASE=upstream runs them
// with upstream's defaults (15s, 10s, 2s) to measure a realistic takeover.

func failoverLeaseArgs() []string {
	if os.Getenv("FAILOVER_LEASE") == "upstream" {
		return []string{"--leader-elect=true", "--leader-elect-lease-duration=15s", "--leader-elect-renew-deadline=10s",
			"--leader-elect-retry-period=2s"}
	}
	return []string{"--leader-elect=true", "--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s",
		"--leader-elect-retry-period=500ms"}
}

// startPair starts a leader and, once it leads, a standby.
func startPair(t *testing.T, e *framework.Env, args []string) (leader, standby *itest.AutoscalerProcess) {
	t.Helper()
	args = append(slices.Clone(args), failoverLeaseArgs()...)
	leader = itest.StartAutoscaler(t, "leader", args...)
	e.Eventually(60*time.Second, "the first replica leads", func(context.Context) (bool, error) {
		return leader.Log.Contains(itest.Acquired), nil
	})
	standby = itest.StartAutoscaler(t, "standby", args...)
	e.Eventually(60*time.Second, "the second replica waits for the lease", func(context.Context) (bool, error) {
		return standby.Log.Contains("Waiting for the leader-election lease"), nil
	})
	return leader, standby
}

// takeover is how long after the SIGKILL the standby held the Lease and
// started its first loop.
type takeover struct{ lease, loop time.Duration }

func (tk takeover) String() string {
	return fmt.Sprintf("lease acquired %v after the SIGKILL, first loop %v after it",
		tk.lease.Round(10*time.Millisecond), tk.loop.Round(10*time.Millisecond))
}

// killLeader SIGKILLs the leader and waits for the standby to lead and loop.
func killLeader(t *testing.T, e *framework.Env, leader, standby *itest.AutoscalerProcess) takeover {
	t.Helper()
	killed := time.Now()
	if err := leader.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("killing the leader: %v", err)
	}
	return waitTakeover(t, e, leader, standby, killed)
}

// waitTakeover waits for the standby to lead and loop after the leader was
// killed at killed.
func waitTakeover(t *testing.T, e *framework.Env, leader, standby *itest.AutoscalerProcess, killed time.Time) takeover {
	t.Helper()
	<-leader.Done
	const started = "Informer caches synced; starting the loop"
	e.Eventually(90*time.Second, "the standby leads and loops", func(context.Context) (bool, error) {
		return standby.Log.Contains(started), nil
	})
	tk := takeover{lease: logTime(t, standby, itest.Acquired).Sub(killed), loop: logTime(t, standby, started).Sub(killed)}
	t.Logf("takeover: %v", tk)
	return tk
}

var klogHeader = regexp.MustCompile(`^[IWEF](\d{2})(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{6})`)

// logTime is the time of p's first log line that contains s (klog's
// header: local time, no year).
func logTime(t *testing.T, p *itest.AutoscalerProcess, s string) time.Time {
	t.Helper()
	for _, line := range strings.Split(p.Log.String(), "\n") {
		if !strings.Contains(line, s) {
			continue
		}
		m := klogHeader.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var mo, d, h, mi, sec, us int
		_, _ = fmt.Sscanf(strings.Join(m[1:], " "), "%d %d %d %d %d %d", &mo, &d, &h, &mi, &sec, &us)
		now := time.Now()
		return time.Date(now.Year(), time.Month(mo), d, h, mi, sec, us*1000, time.Local)
	}
	t.Fatalf("%s never logged %q", p.Name, s)
	return time.Time{}
}

// deletions counts, by node name, the deletions the processes' logs report:
// instances of rolled back attempts, broken instances, scaled-down nodes.
func deletions(ps ...*itest.AutoscalerProcess) map[string]int {
	re := regexp.MustCompile(`"(?:Deleted instance of a rolled back all-or-nothing scale-up|Deleted broken instance)"[^\n]*? instance="` +
		regexp.QuoteMeta(kwok.ProviderIDPrefix) + `([^"]+)"|"(?:Scaled down an empty node|Scaled down a node after draining it)"[^\n]*? node="([^"]+)"`)
	out := map[string]int{}
	for _, p := range ps {
		for _, m := range re.FindAllStringSubmatch(p.Log.String(), -1) {
			out[m[1]+m[2]]++
		}
	}
	return out
}

func twice(deleted map[string]int) []string {
	var out []string
	for n, c := range deleted {
		if c > 1 {
			out = append(out, n)
		}
	}
	return out
}

// pendingInstances are the instances of group the kwok provider created
// and that have no Node yet.
func pendingKwokInstances(t *testing.T, e *framework.Env, group string) int {
	t.Helper()
	cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), kwok.StateConfigMap, metav1.GetOptions{})
	if err != nil {
		return 0
	}
	return strings.Count(cm.Data["instances"], `"group":"`+group+`"`)
}

// nodeDeletions watches the Nodes of pool and counts their deletions.
func nodeDeletions(t *testing.T, e *framework.Env, pool string) func() []string {
	t.Helper()
	w, err := e.Client.CoreV1().Nodes().Watch(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var deleted []string
	go func() {
		for ev := range w.ResultChan() {
			if n, ok := ev.Object.(*apiv1.Node); ok && ev.Type == watch.Deleted {
				mu.Lock()
				deleted = append(deleted, n.Name)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(w.Stop)
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(deleted)
	}
}

// TestFailoverDuringAtomicScaleUp: the leader is killed while two
// all-or-nothing attempts are in flight (their nodes register 12 s after the
// increase). The new leader restores both from the records: it finishes the
// one whose nodes join (Provisioned, no second scale-up) and rolls back the
// one whose second group never delivers, at the first leader's deadline,
// deleting exactly its instances once; that request then fails as expired.
// Nothing is orphaned and nothing is deleted twice.
func TestFailoverDuringAtomicScaleUp(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	fast, ghost, shape := framework.UniqueName("fast"), framework.UniqueName("ghost"), framework.UniqueName("shape")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 4
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 12s}
- name: %[2]s
  maxSize: 1
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 10m}
`, fast, ghost, framework.TestNamespaceLabel, e.Namespace, shape))
	// a-finish: two nodes of fast. b-rollback: 12 CPUs with fast's last two
	// nodes and ghost's only one, which never registers.
	e.Request("a-finish", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 8, CPU: "1", Selector: map[string]string{"pool": fast}})
	e.Request("b-rollback", provreq.ClassBestEffortAtomicScaleUp, map[string]string{"ValidUntilSeconds": "20"}, false,
		itest.PodSet{Name: "main", Count: 12, CPU: "1", Selector: map[string]string{"shape": shape}})
	leader, standby := startPair(t, e.Env, itest.ScaleUpArgs(e.Env, path, "--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=2s", "--provisioning-request-max-backoff-time=4s",
		"--max-node-provision-time=30s", "--scale-down-enabled=false"))

	for _, name := range []string{"a-finish", "b-rollback"} {
		e.Condition(name, provreq.ConditionProvisioned, metav1.ConditionFalse, processor.ReasonProvisioningInProgress, 30*time.Second)
	}
	records, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(e.Context(), processor.RecordsConfigMap, metav1.GetOptions{})
	if err != nil || len(records.Data) != 2 {
		t.Fatalf("records of the attempts in flight: %v, %v; want two", records, err)
	}
	tk := killLeader(t, e.Env, leader, standby)
	e.Eventually(30*time.Second, "the new leader restores both attempts", func(context.Context) (bool, error) {
		return strings.Count(standby.Log.String(), "Restored an all-or-nothing attempt in flight") == 2, nil
	})
	restored := logTime(t, standby, "Restored the records of all-or-nothing attempts").Sub(logTime(t, standby, itest.Acquired))

	e.Condition("a-finish", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	rolled := e.Condition("b-rollback", provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired, 60*time.Second)
	if msg := provreq.FindCondition(rolled.Status.Conditions, provreq.ConditionFailed).Message; !strings.Contains(msg, "last attempt failed") {
		t.Errorf("b-rollback's Failed message %q does not say its attempt failed", msg)
	}
	if strings.Count(standby.Log.String(), "Scaled up for a ProvisioningRequest") != 0 {
		t.Error("the new leader scaled up again for a request whose attempt it restored")
	}
	// Left on record: a-finish's nodes (while it is provisioned), no attempt.
	e.Eventually(30*time.Second, "only a-finish's nodes on record", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, processor.RecordsConfigMap, metav1.GetOptions{})
		if err != nil || len(cm.Data) != 1 {
			return false, nil
		}
		for _, rec := range cm.Data {
			return strings.Contains(rec, `"request":"`+e.Namespace+`/a-finish"`) && strings.Contains(rec, `"nodes":[`) &&
				!strings.Contains(rec, `"attempt"`), nil
		}
		return false, nil
	})
	// Orphans: instances of either group beyond a-finish's two nodes.
	time.Sleep(2 * time.Second)
	nodes := itest.NodesPerPool(e.Env)
	orphans := nodes[fast] - 2 + nodes[ghost] + pendingKwokInstances(t, e.Env, fast) + pendingKwokInstances(t, e.Env, ghost)
	deleted := deletions(leader, standby)
	t.Logf("figures: %v; attempts restored %v after the lease; nodes %v; orphaned %d; deleted %v (twice: %v)", tk,
		restored.Round(10*time.Millisecond), nodes, orphans, deleted, twice(deleted))
	if orphans != 0 {
		t.Errorf("%d instances orphaned (nodes %v)", orphans, nodes)
	}
	if len(twice(deleted)) > 0 {
		t.Errorf("deleted twice: %v", twice(deleted))
	}
	// b-rollback's two fast instances by name, and ghost's one (by the
	// rollback or, past the provision time, by the cleanup).
	if len(deleted) != 3 {
		t.Errorf("deleted %v, want b-rollback's three instances", deleted)
	}
}

// TestFailoverDuringDrain: the leader is killed while it drains a node
// (a PDB refuses the eviction). The new leader's start-up clean-up lifts the
// deletion taint; once the PDB is gone it removes the node itself: one node
// deleted, once, both pods Running, no node left tainted or cordoned.
func TestFailoverDuringDrain(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := framework.New(t)
	group := framework.UniqueName("drain")
	path := itest.GroupsConfig(e, group)
	itest.DumpPods(e)
	itest.GroupNode(e, group, group+"-a", nil)
	rs := itest.ReplicaSet(e, "web", group, 1, "1", false)
	e.Eventually(30*time.Second, "the first web pod Running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 1, err
	})
	itest.GroupNode(e, group, group+"-b", nil)
	time.Sleep(2 * time.Second)
	if _, err := e.Client.AppsV1().ReplicaSets(e.Namespace).Patch(e.Context(), rs.Name, types.MergePatchType,
		[]byte(`{"spec":{"replicas":2}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "one web pod on each node", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 2 && len(nodes) == 2, err
	})
	deletedNodes := nodeDeletions(t, e, group)
	leader, standby := startPair(t, e, itest.ScaleDownArgs(e, path, "--max-pod-eviction-time=5m",
		"--node-delete-delay-after-taint=3s", "--unremovable-node-recheck-timeout=5s"))

	// Once the leader has tainted a node for removal (the drain starts 3 s
	// later), a PDB refuses the eviction: the drain is retried until the kill.
	var draining string
	e.Eventually(60*time.Second, "a node tainted for removal", func(ctx context.Context) (bool, error) {
		list, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "pool=" + group})
		if err != nil {
			return false, err
		}
		for _, n := range list.Items {
			for _, taint := range n.Spec.Taints {
				if taint.Key == clusterstate.ToBeDeletedTaint {
					draining = n.Name
				}
			}
		}
		return draining != "", nil
	})
	two := intstr.FromInt32(2)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &two, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(30*time.Second, "the leader drains the node", func(context.Context) (bool, error) {
		return leader.Log.Contains("Scaling down a node: draining it"), nil
	})
	time.Sleep(2 * time.Second) // an eviction refused by the PDB, retried
	running, _, err := itest.PodsOf(e.Context(), e, "web")
	if err != nil || running != 2 {
		t.Fatalf("%d web pods running when the leader is killed (%v); want both, the drain held by the PDB", running, err)
	}
	killed := time.Now()
	if err := leader.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// The PDB goes before the new leader's first loop, which would
	// otherwise find the node blocked.
	if err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Delete(e.Context(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tk := waitTakeover(t, e, leader, standby, killed)
	e.Eventually(90*time.Second, "one node left, both pods on it", func(ctx context.Context) (bool, error) {
		running, nodes, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 2 && len(nodes) == 1 && len(itest.NodeNames(e, group)) == 1, err
	})
	cleaned := standby.Log.Contains("Removed a deletion taint left by a previous run")
	left, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + group})
	if err != nil {
		t.Fatal(err)
	}
	orphans := 0
	for _, n := range left.Items {
		if n.Spec.Unschedulable || slices.ContainsFunc(n.Spec.Taints, func(t apiv1.Taint) bool {
			return t.Key == clusterstate.ToBeDeletedTaint
		}) {
			orphans++
		}
	}
	time.Sleep(2 * time.Second)
	deleted := deletions(leader, standby)
	t.Logf("figures: %v; drained when killed %s; taint cleaned at start-up %v; nodes deleted %v; tainted or cordoned nodes left %d; deletions logged %v",
		tk, draining, cleaned, deletedNodes(), orphans, deleted)
	if !cleaned {
		t.Error("the new leader did not lift the deletion taint left by the killed one")
	}
	if got := deletedNodes(); len(got) != 1 {
		t.Errorf("nodes deleted %v, want one", got)
	}
	if len(twice(deleted)) > 0 || deleted[draining]+deleted[otherOf(group, draining)] != 1 {
		t.Errorf("deletions logged %v, want one node deleted once", deleted)
	}
	if leader.Log.Contains("Scaled down a node after draining it") {
		t.Error("the killed leader reports a deletion")
	}
	if orphans != 0 {
		t.Errorf("%d nodes left tainted or cordoned", orphans)
	}
}

func otherOf(group, name string) string {
	if name == group+"-a" {
		return group + "-b"
	}
	return group + "-a"
}

// TestFailoverKeepsCheckCapacityBooking: a check-capacity request is
// provisioned on two empty nodes, which scale-down keeps for its booking.
// The leader is killed; the new leader books it from its conditions in its
// first loop, so scale-down keeps the nodes and a second request that needs
// the same room is refused, until the workload arrives and consumes the
// booking. No request is lost, no node deleted.
func TestFailoverKeepsCheckCapacityBooking(t *testing.T) {
	itest.SkipUnlessSlow(t)
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	group := framework.UniqueName("booked")
	path := itest.GroupsConfig(e.Env, group)
	itest.GroupNode(e.Env, group, group+"-a", nil)
	itest.GroupNode(e.Env, group, group+"-b", nil)
	sel := map[string]string{"pool": group}
	deletedNodes := nodeDeletions(t, e.Env, group)
	e.Request("booked", provreq.ClassCheckCapacity, nil, false, itest.PodSet{Name: "main", Count: 6, CPU: "1", Selector: sel})
	leader, standby := startPair(t, e.Env, itest.ScaleDownArgs(e.Env, path, "--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=2s", "--provisioning-request-max-backoff-time=4s",
		"--scale-down-unneeded-time=5s"))
	e.Condition("booked", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 30*time.Second)
	time.Sleep(6 * time.Second) // past the unneeded time: the booking keeps the nodes
	tk := killLeader(t, e.Env, leader, standby)

	// Eight CPUs, six booked: four more do not fit.
	e.Request("second", provreq.ClassCheckCapacity, map[string]string{"noRetry": "true"}, false,
		itest.PodSet{Name: "main", Count: 4, CPU: "1", Selector: sel})
	second := e.Condition("second", provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound, 30*time.Second)
	time.Sleep(6 * time.Second) // past the unneeded time again, under the new leader
	if got := deletedNodes(); len(got) != 0 {
		t.Fatalf("nodes %v deleted although booked", got)
	}
	e.Consumers("booked", 6, "1", sel)
	e.Condition("booked", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, 60*time.Second)
	booked, err := e.PRs.Get(e.Context(), "booked", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := provreq.FindCondition(booked.Status.Conditions, provreq.ConditionProvisioned)
	t.Logf("figures: %v; booked Provisioned=%s since %v; second %s; nodes deleted %v", tk, c.Status,
		c.LastTransitionTime.Format(time.RFC3339), provreq.FindCondition(second.Status.Conditions, provreq.ConditionFailed).Reason,
		deletedNodes())
	if c.Status != metav1.ConditionTrue {
		t.Error("the booked request lost its Provisioned condition")
	}
	if got := deletedNodes(); len(got) != 0 {
		t.Errorf("nodes %v deleted", got)
	}
}
