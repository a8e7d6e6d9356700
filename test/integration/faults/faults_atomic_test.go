package faults

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// atomicFaults are the kwok faults of the groups of the all-or-nothing
// fault test, group i taking atomicFaults[i % 3], with the share of
// increases that fail in part given: every group fails part of its
// increases; one also lists new instances 2 s late; one also fails 5% of
// its calls and loses the answer of 10% of its size changes.
var atomicFaults = []string{
	"registrationDelay: 1s, partialFailureRate: %v",
	"registrationDelay: 1s, partialFailureRate: %v, listingDelay: 2s",
	"registrationDelay: 1s, partialFailureRate: %v, apiErrorRate: 0.05, lostResponseRate: 0.1",
}

// TestAtomicRequestsUnderFaultsLeaveNoOrphans: 10 all-or-nothing
// ProvisioningRequests, each of two PodSets pinned to two different groups
// (so every attempt spans two groups), against groups that fail some
// instances of 20% of their increases, list late, fail calls and lose
// answers. Every request ends Provisioned by a scale-up of its own, and
// once the rollbacks are done every Node of the groups is one a request
// asked for and no instance is left without a Node: 0 orphans.
func TestAtomicRequestsUnderFaultsLeaveNoOrphans(t *testing.T) {
	itest.SkipUnlessSlow(t)
	atomicUnderFaults(t, 10, 3, 0.2, 2*time.Minute)
}

// TestAtomicRequestsUnderFaultsLong is the same with 100 requests over six
// groups that fail part of 30% of their increases (see docs/reliability.md):
//
//	RELIABILITY_LONG=1 go test -race -count=1 -timeout 30m -run 'TestAtomicRequestsUnderFaultsLong' -v ./test/integration/faults/
func TestAtomicRequestsUnderFaultsLong(t *testing.T) {
	itest.SkipUnlessSlow(t)
	skipUnlessLong(t)
	atomicUnderFaults(t, 100, 6, 0.3, 20*time.Minute)
}

func atomicUnderFaults(t *testing.T, requests, groups int, partialFailureRate float64, timeout time.Duration) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	names := make([]string, groups)
	for i := range names {
		names[i] = framework.UniqueName(fmt.Sprintf("af%d", i))
	}
	// Request i: PodSet a of 1-2 pods in group i, PodSet b of 1-2 pods in
	// group i+1; a 3-CPU pod per 4-CPU node, so each pod is one node.
	want := map[string]int{}
	type req struct {
		name string
		a, b itest.PodSet
	}
	reqs := make([]req, requests)
	for i := range reqs {
		ga, gb := names[i%groups], names[(i+1)%groups]
		reqs[i] = req{name: fmt.Sprintf("req-%03d", i),
			a: itest.PodSet{Name: "a", Count: int32(1 + i%2), CPU: "3", Selector: map[string]string{"pool": ga}},
			b: itest.PodSet{Name: "b", Count: int32(1 + (i/2)%2), CPU: "3", Selector: map[string]string{"pool": gb}}}
		want[ga] += int(reqs[i].a.Count)
		want[gb] += int(reqs[i].b.Count)
	}
	total := 0
	var cfg strings.Builder
	cfg.WriteString("nodeGroups:\n")
	for i, g := range names {
		total += want[g]
		// Room for the group's share and a few failed instances.
		fmt.Fprintf(&cfg, `- name: %[1]s
  maxSize: %[2]d
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {%[5]s}
`, g, want[g]+6, framework.TestNamespaceLabel, e.Namespace, fmt.Sprintf(atomicFaults[i%len(atomicFaults)], partialFailureRate))
	}
	path := itest.WriteKwokConfig(e.Env, cfg.String())
	deletions := itest.WatchNodeDeletions(e.Env)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e.Env, path, "--v=2", "--enable-provisioning-requests",
		"--provisioning-request-initial-backoff-time=1s", "--provisioning-request-max-backoff-time=3s",
		"--initial-node-group-backoff-duration=1s", "--max-node-group-backoff-duration=3s",
		"--max-node-provision-time=20s", "--scale-down-enabled=false",
		"--kube-client-qps=100", "--kube-client-burst=200")...)
	time.Sleep(time.Second) // caches synced
	start := time.Now()
	for _, r := range reqs {
		e.Request(r.name, provreq.ClassBestEffortAtomicScaleUp, nil, false, r.a, r.b)
	}

	provisioned := map[string]string{}
	e.Eventually(timeout, fmt.Sprintf("all %d requests Provisioned", requests), func(ctx context.Context) (bool, error) {
		list, err := e.PRs.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, pr := range list.Items {
			if c := provreq.FindCondition(pr.Status.Conditions, provreq.ConditionProvisioned); c != nil && c.Status == metav1.ConditionTrue {
				provisioned[pr.Name] = c.Reason
			}
			if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionFailed) {
				return false, fmt.Errorf("request %s failed", pr.Name)
			}
		}
		return len(provisioned) == requests, nil
	})
	toProvisioned := time.Since(start)

	// Rollbacks still running finish: then every Node of the groups is one
	// a request asked for, and no instance is left without its Node.
	var nodes map[string]int
	var pending []string
	settle := time.Now().Add(60 * time.Second)
	for {
		nodes, pending = itest.NodesPerPool(e.Env), itest.PendingInstances(e.Env, names)
		equal := len(pending) == 0
		for _, g := range names {
			equal = equal && nodes[g] == want[g]
		}
		if equal || time.Now().After(settle) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	orphans := len(pending)
	for _, g := range names {
		if nodes[g] != want[g] {
			t.Errorf("group %s has %d Nodes, its requests asked for %d", g, nodes[g], want[g])
		}
		orphans += max(0, nodes[g]-want[g])
	}
	if len(pending) > 0 {
		t.Errorf("instances left without a Node after every request was Provisioned: %v", pending)
	}
	for name, reason := range provisioned {
		if reason != provreq.ReasonCapacityIsProvisioned {
			// Every Node is booked by the request that asked for it: a
			// request that found room without a scale-up found a leftover.
			t.Errorf("request %s is Provisioned with reason %s, not by a scale-up of its own", name, reason)
		}
	}
	// And it stays so: no Provisioned capacity is taken away afterwards.
	time.Sleep(3 * time.Second)
	list, err := e.PRs.List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, pr := range list.Items {
		if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionCapacityRevoked) {
			t.Errorf("request %s lost its capacity", pr.Name)
		}
	}
	if got := itest.NodesPerPool(e.Env); fmt.Sprint(got) != fmt.Sprint(nodes) {
		t.Errorf("Nodes changed after the rollbacks settled: %v -> %v", nodes, got)
	}
	log := p.Log.String()
	if strings.Contains(log, "panic") {
		t.Error("the autoscaler's log mentions a panic")
	}
	rolledBackNodes := 0
	for _, d := range deletions.All() {
		if d.Ready {
			rolledBackNodes++
		}
	}
	t.Logf("figures: partial-failure-rate=%v requests=%d nodes=%d groups=%d to-all-provisioned=%.1fs attempts=%d attempts-rolled-back=%d "+
		"failed-instances-deleted-by-cleanup=%d ready-nodes-deleted=%d nodes-deleted=%d orphans=%d",
		partialFailureRate, requests, total, groups, toProvisioned.Seconds(), itest.CountLines(log, "Scaled up for a ProvisioningRequest"),
		itest.CountLines(log, "The scale-up was rolled back"), countMatches(log, `"Deleted broken instance"`, "failed-creation"),
		rolledBackNodes, len(deletions.All()), orphans)
}
