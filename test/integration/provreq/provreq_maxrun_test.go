package provreq

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestMaxRunDurationRevokesAndReleasesNodes: an all-or-nothing request with
// maxRunDurationSeconds=20 is Provisioned (its message says when the
// capacity is revoked), its pods run on its two new nodes, and 20 s after
// it was provisioned it is CapacityRevoked (MaxRunDurationExceeded). Its
// nodes stay while its pods run (the grace is long); once the workload is
// gone (its pods and, as Kueue does, the request deleted) the disruption
// engine removes them, and only them. A request with an invalid
// maxRunDurationSeconds fails with InvalidParameters.
func TestMaxRunDurationRevokesAndReleasesNodes(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	group := framework.UniqueName("g")
	path := itest.OneGroupConfig(e.Env, group, 10, "registrationDelay: 1s")
	sel := map[string]string{"pool": group}
	// A node of the pool that is not one of the request's.
	bystander := group + "-bystander"
	e.Request("timed", provreq.ClassBestEffortAtomicScaleUp, map[string]string{"maxRunDurationSeconds": "20"}, false,
		itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	e.Request("bad", provreq.ClassBestEffortAtomicScaleUp, map[string]string{"maxRunDurationSeconds": "604801"}, false,
		itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: sel})
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path,
		"--provisioning-request-max-run-grace=10m", "--disruption-settle-time=0s")...)

	bad := e.Condition("bad", provreq.ConditionFailed, metav1.ConditionTrue, "InvalidParameters", 30*time.Second)
	if msg := provreq.FindCondition(bad.Status.Conditions, provreq.ConditionFailed).Message; !strings.Contains(msg, "maxRunDurationSeconds") {
		t.Errorf("the failure %q does not name the parameter", msg)
	}

	timed := e.Condition("timed", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	prov := provreq.FindCondition(timed.Status.Conditions, provreq.ConditionProvisioned)
	revokeAt := prov.LastTransitionTime.Add(20 * time.Second)
	if want := "The capacity is revoked at " + revokeAt.UTC().Format(time.RFC3339); !strings.Contains(prov.Message, want) {
		t.Errorf("Provisioned message %q does not say %q", prov.Message, want)
	}
	mine := poolNodes(e, group)
	if len(mine) != 2 {
		t.Fatalf("the request's nodes: %v, want 2", mine)
	}
	e.CreateNode(framework.MakeNode(bystander).Label("pool", group).Obj())
	e.Consumers("timed", 2, "3", sel)
	e.Eventually(60*time.Second, "both consuming pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e.Env, 2)
	})
	e.Condition("timed", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, 30*time.Second)

	revoked := e.Condition("timed", provreq.ConditionCapacityRevoked, metav1.ConditionTrue, "MaxRunDurationExceeded", 60*time.Second)
	c := provreq.FindCondition(revoked.Status.Conditions, provreq.ConditionCapacityRevoked)
	if c.LastTransitionTime.Time.Before(revokeAt) {
		t.Errorf("revoked at %v, before the limit passed at %v", c.LastTransitionTime, revokeAt)
	}
	for _, part := range []string{"maxRunDurationSeconds=20", revokeAt.UTC().Format(time.RFC3339), mine[0], mine[1]} {
		if !strings.Contains(c.Message, part) {
			t.Errorf("CapacityRevoked message %q does not name %q", c.Message, part)
		}
	}
	// Its pods still run and the grace is long: its nodes stay.
	time.Sleep(5 * time.Second)
	if got := poolNodes(e, group); len(got) != 3 {
		t.Fatalf("nodes %v while the request's pods still run, want its 2 and the bystander", got)
	}

	// The workload is evicted, as Kueue does it: its pods and the request go.
	if err := e.Client.CoreV1().Pods(e.Namespace).DeleteCollection(e.Context(), metav1.DeleteOptions{
		GracePeriodSeconds: new(int64)}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := e.PRs.Delete(e.Context(), "timed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(90*time.Second, "the request's nodes removed", func(ctx context.Context) (bool, error) {
		got := poolNodes(e, group)
		return len(got) == 1 && got[0] == bystander, nil
	})
	// The disruption engine removed them, for the run limit (ordinary
	// scale-down waits 10 minutes for an unneeded node).
	started := 0
	for _, line := range strings.Split(p.Log.String(), "\n") {
		if strings.Contains(line, "Disruption started") && strings.Contains(line, "maxrunduration") {
			started++
			if !strings.Contains(line, mine[0]) && !strings.Contains(line, mine[1]) {
				t.Errorf("a run-limit disruption of another node: %s", line)
			}
		}
	}
	if started != 2 {
		t.Errorf("%d run-limit disruptions started, want 2 (one per node)", started)
	}
}

// poolNodes are the names of the nodes of pool.
func poolNodes(e *itest.ProvreqEnv, pool string) []string {
	e.T.Helper()
	list, err := e.Client.CoreV1().Nodes().List(e.Context(), metav1.ListOptions{LabelSelector: "pool=" + pool})
	if err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, n := range list.Items {
		if n.DeletionTimestamp == nil {
			out = append(out, n.Name)
		}
	}
	return out
}
