package processor

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

// atomicCluster is a cluster whose next atomic scale-up adds asked
// instances to group g, listing listed of them at once.
func atomicCluster(asked int, listed ...string) *cluster {
	return &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 1, To: 1 + asked}},
		Before: map[string][]string{"g": {"old"}}, Instances: map[string][]string{"g": listed}},
		groups: map[string]GroupView{"g": view(1+asked, append([]string{"old=old"}, listed...)...)}}
}

func undoString(u map[string]scaleup.Undo) string { return fmt.Sprint(u) }

// A cloud that lists new instances only later: the request is not
// Provisioned until every instance asked for is listed and registered.
func TestAtomicWaitsForInstancesListedLater(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	// Nothing listed yet: the old code saw "0 of 0 registered" and said Provisioned.
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, "2 not listed") {
		t.Errorf("message %q does not say two instances are not listed yet", msg)
	}
	// One listed and registered, one listed only: still in progress.
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2")
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2=n2")
	loop(p, c, t0.Add(3*time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	if len(c.rolledBack) != 0 || c.scaleCalls != 1 {
		t.Errorf("rollbacks %v, scale-ups %d; want none and one", c.rolledBack, c.scaleCalls)
	}
	// Its nodes are those it was given: n1 and n2, not the old one.
	if fmt.Sprint(p.states[pr.UID].nodes) != "map[n1:true n2:true]" {
		t.Errorf("provisioned nodes %v", p.states[pr.UID].nodes)
	}
}

// A timed-out attempt deletes the instances that were listed, by name, and
// cancels those never listed.
func TestAtomicTimeoutRollsBackListedAndUnlisted(t *testing.T) {
	c := atomicCluster(3)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(4, "old=old", "i1=n1")
	loop(p, c, t0.Add(time.Minute), nil, nil)
	loop(p, c, t0.Add(16*time.Minute), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 2}]" {
		t.Fatalf("rolled back %v, want i1 by name and two unlisted", c.rolledBack)
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, "2 never listed") {
		t.Errorf("message %q does not count the unlisted instances", msg)
	}
}

// The cloud lowered the group's target below what the attempt still waits
// for: those instances will not come, and the attempt is rolled back at
// once instead of at the timeout.
func TestAtomicTargetDropRollsBack(t *testing.T) {
	c := atomicCluster(2)
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(2, "old=old", "i1")
	loop(p, c, t0.Add(time.Minute), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 1}]" {
		t.Fatalf("rolled back %v, want i1 and the one not coming", c.rolledBack)
	}
	if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, "no longer covers") {
		t.Errorf("message %q does not explain the target drop", msg)
	}
}

// Every path that ends an attempt rolls it back and forgets it.
func TestEndedAttemptsAreRolledBackAndForgotten(t *testing.T) {
	for _, tc := range []struct {
		name   string
		end    func(c *cluster, pr *v1.ProvisioningRequest)
		at     time.Duration
		reason string // the Failed reason, "" when the request is gone
		undo   string // what is rolled back: by default the listed instance by name and the unlisted one
	}{
		// A deleted request's listed instance is left to scale-down; only
		// the one not created yet is cancelled.
		{name: "request deleted", end: func(c *cluster, _ *v1.ProvisioningRequest) { c.requests = nil }, at: time.Minute,
			undo: "map[g:{[] 1}]"},
		{name: "template gone", end: func(c *cluster, _ *v1.ProvisioningRequest) { delete(c.templates, "ns/ppt-a") }, at: 2 * time.Minute,
			reason: provreq.ReasonFailedToCreatePods},
		{name: "request expired", end: func(_ *cluster, pr *v1.ProvisioningRequest) {
			pr.CreationTimestamp = metav1.NewTime(t0.Add(-7 * 24 * time.Hour))
		},
			at: time.Minute, reason: provreq.ReasonExpired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := atomicCluster(2, "i1")
			pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
			p := newTestProcessor(c, nil)
			loop(p, c, t0, nil, nil)
			tc.end(c, pr)
			if tc.name == "template gone" {
				// Within the grace period the attempt goes on.
				loop(p, c, t0.Add(30*time.Second), nil, nil)
				if len(c.rolledBack) != 0 || p.states[pr.UID].attempt == nil {
					t.Fatalf("attempt ended while the template is waited for: rollbacks %v", c.rolledBack)
				}
			}
			loop(p, c, t0.Add(tc.at), nil, nil)
			want := "map[g:{[i1] 1}]"
			if tc.undo != "" {
				want = tc.undo
			}
			if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != want {
				t.Fatalf("rolled back %v, want %s", c.rolledBack, want)
			}
			if tc.reason != "" {
				wantCond(t, pr, provreq.ConditionFailed, metav1.ConditionTrue, tc.reason)
			}
			if st := p.states[pr.UID]; st != nil && st.attempt != nil {
				t.Error("the attempt is still remembered")
			}
			if len(p.undos) != 0 {
				t.Errorf("%d rollbacks still pending after a complete one", len(p.undos))
			}
			loop(p, c, t0.Add(tc.at+time.Minute), nil, nil)
			if len(c.rolledBack) != 1 {
				t.Errorf("rolled back again: %v", c.rolledBack)
			}
			if tc.reason == "" && len(p.states) != 0 {
				t.Errorf("state kept for a deleted request: %v", p.states)
			}
		})
	}
}

// What a rollback could not finish (instances listed meanwhile) is finished
// in the next loop, naming the instances listed since; then it is dropped.
func TestUnfinishedRollbackIsRetriedWithNewlyListedInstances(t *testing.T) {
	c := atomicCluster(2, "i1")
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	pr.CreationTimestamp = metav1.NewTime(t0.Add(-7 * 24 * time.Hour)) // expired: the attempt is rolled back
	c.left = map[string]scaleup.Undo{"g": {Unlisted: 1}}               // i2 was listed just before the rollback
	loop(p, c, t0.Add(time.Minute), nil, nil)
	if len(p.undos) != 1 {
		t.Fatalf("%d pending rollbacks, want the unfinished one", len(p.undos))
	}
	c.groups["g"] = view(2, "old=old", "i2") // i1 is deleted, i2 listed now
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	if len(c.rolledBack) != 2 || undoString(c.rolledBack[1]) != "map[g:{[i2] 0}]" {
		t.Fatalf("rollbacks %v, want i2 deleted by name in the second", c.rolledBack)
	}
	if len(p.undos) != 0 {
		t.Errorf("%d rollbacks still pending", len(p.undos))
	}
}

// An all-or-nothing request whose pods fit only on nodes still to come is
// not reported provisioned: it holds them and waits.
func TestAtomicFittingOnlyUpcomingNodesWaits(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Fit: true}}
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 2, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonWaitingForUpcoming)
	c.fits = true // they registered
	loop(p, c, t0.Add(time.Second), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
}

// Pods consuming a request this instance does not handle (another
// processor instance, another class) are set aside, unless it failed.
func TestConsumersOfForeignRequestsAreSetAside(t *testing.T) {
	c := &cluster{fits: true}
	c.addRequest("other-instance", provreq.ClassCheckCapacity, 1, map[string]string{"processorInstance": "second"}, t0)
	c.addRequest("other-class", "queued-provisioning.gke.io", 1, nil, t0)
	failed := c.addRequest("other-failed", "queued-provisioning.gke.io", 1, nil, t0)
	failed.Status.Conditions = []metav1.Condition{{Type: provreq.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: "Whatever", LastTransitionTime: metav1.NewTime(t0)}}
	p := newTestProcessor(c, nil)
	deprecated := consumer("other-class", false)
	deprecated.Name = "deprecated-key"
	deprecated.Annotations = map[string]string{provreq.DeprecatedConsumeAnnotation: "other-class"}
	pending := []*apiv1.Pod{consumer("other-instance", false), deprecated, consumer("other-failed", false)}
	l := loop(p, c, t0, nil, pending)
	if !l.SetAside(pending[0]) || !l.SetAside(pending[1]) || l.SetAside(pending[2]) {
		t.Errorf("set aside: other instance %v, other class %v, failed %v; want the first two only",
			l.SetAside(pending[0]), l.SetAside(pending[1]), l.SetAside(pending[2]))
	}
	if got := l.Pending(); len(got) != 1 || got[0] != pending[2] {
		t.Errorf("pending for the ordinary scale-up: %v, want only the failed request's pod", got)
	}
	for _, pr := range c.requests {
		if len(pr.Status.Conditions) > 0 && pr != failed {
			t.Errorf("%s was touched: %v", pr.Name, pr.Status.Conditions)
		}
	}
}

// A request above --max-pods-per-provisioning-request fails with a clear
// reason and an event, without its pods ever being built; the other
// requests of the loop go on.
func TestHugeRequestFailsWithoutBuildingItsPods(t *testing.T) {
	c := &cluster{fits: true}
	huge := c.addRequest("huge", provreq.ClassCheckCapacity, 2_000_000_000, nil, t0)
	small := c.addRequest("small", provreq.ClassCheckCapacity, 3, nil, t0.Add(time.Second))
	recorder := record.NewFakeRecorder(10)
	p := New(testOptions(), c, c, c, c.rollback, WithEventRecorder(recorder))
	p.opts.MaxPodsPerRequest = 50000
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, huge, provreq.ConditionFailed, metav1.ConditionTrue, ReasonTooManyPods)
	if msg := cond(t, huge, provreq.ConditionFailed).Message; !strings.Contains(msg, "2000000000") || !strings.Contains(msg, "50000") {
		t.Errorf("message %q does not give the count and the cap", msg)
	}
	wantCond(t, small, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	if c.templateGets != 1 {
		t.Errorf("%d PodTemplate reads, want only the small request's", c.templateGets)
	}
	found := false
	for len(recorder.Events) > 0 {
		if e := <-recorder.Events; strings.Contains(e, "Warning FailedTooManyPods") {
			found = true
		}
	}
	if !found {
		t.Error("no warning event for the huge request")
	}
}

// Found by FuzzProvisioningRequest: PodSets the CRD's schema forbids (a
// CRD installed without it lets them in) fail the request with
// InvalidPodSets. A negative count used to hide a huge one from the pod
// cap, and the loop then built 2^31-1 pods; a count of 0 or no PodSet at
// all was "provisioned" with no pod. A non-boolean waitForReadyNodes was
// read as false; it now fails as InvalidParameters, as noRetry does.
func TestInvalidPodSetsFailBeforeAnyPodIsBuilt(t *testing.T) {
	c := &cluster{fits: true}
	hidden := c.addRequest("hidden", provreq.ClassCheckCapacity, 2_147_483_647, nil, t0)
	hidden.Spec.PodSets = append(hidden.Spec.PodSets, v1.PodSet{PodTemplateRef: hidden.Spec.PodSets[0].PodTemplateRef,
		Count: -2_147_483_648})
	zero := c.addRequest("zero", provreq.ClassCheckCapacity, 0, nil, t0)
	none := c.addRequest("none", provreq.ClassBestEffortAtomicScaleUp, 1, nil, t0)
	none.Spec.PodSets = nil
	unnamed := c.addRequest("unnamed", provreq.ClassCheckCapacity, 1, nil, t0)
	unnamed.Spec.PodSets[0].PodTemplateRef.Name = ""
	notBool := c.addRequest("not-bool", provreq.ClassBestEffortAtomicScaleUp, 1, map[string]string{
		ParamWaitForReadyNodes: "yes"}, t0)
	ok := c.addRequest("ok", provreq.ClassCheckCapacity, 2, nil, t0)
	p := newTestProcessor(c, func(o *Options) { o.MaxPodsPerRequest = 50000 })
	loop(p, c, t0.Add(time.Second), nil, nil)
	for _, pr := range []*v1.ProvisioningRequest{hidden, zero, none, unnamed} {
		wantCond(t, pr, provreq.ConditionFailed, metav1.ConditionTrue, ReasonInvalidPodSets)
	}
	wantCond(t, notBool, provreq.ConditionFailed, metav1.ConditionTrue, ReasonInvalidParameters)
	wantCond(t, ok, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	if c.templateGets != 1 {
		t.Errorf("%d PodTemplate reads, want only the valid request's", c.templateGets)
	}
}

// A request deleted during its scale-up: the instances not created yet are
// cancelled, but only in a loop where no ordinary pod is pending (those
// might take the upcoming nodes); the ones created are never deleted by it.
func TestDeletedRequestCancelsOnlyWhatIsNotCreated(t *testing.T) {
	c := atomicCluster(3, "i1")
	c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 12, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.requests = nil
	pending := []*apiv1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}}
	loop(p, c, t0.Add(time.Minute), nil, pending)
	if len(c.rolledBack) != 0 || len(p.undos) != 1 {
		t.Fatalf("with a pod pending: rollbacks %v, %d kept; want none made and one kept", c.rolledBack, len(p.undos))
	}
	c.groups["g"] = view(3, "old=old", "i1", "i2") // i2 created meanwhile
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[] 1}]" {
		t.Fatalf("rollbacks %v, want the one instance never created cancelled and none deleted by name", c.rolledBack)
	}
	if len(p.undos) != 0 {
		t.Errorf("%d rollbacks kept after the cancellation", len(p.undos))
	}
	// Everything created: nothing to cancel, nothing deleted.
	c = atomicCluster(1, "i1")
	c.addRequest("b", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0)
	p = newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.requests = nil
	loop(p, c, t0.Add(time.Minute), nil, nil)
	if len(c.rolledBack) != 0 || len(p.undos) != 0 {
		t.Errorf("all created: rollbacks %v, %d kept; want none", c.rolledBack, len(p.undos))
	}
}

// Two attempts in the same group, the second made before the cloud listed
// the first's instance (so its before-set lacks it). The first request is
// Provisioned with its instance; the second must not then claim that
// instance as its own once the first attempt is over: it waits for the
// instance it asked for. A fault test on the local control plane saw
// requests Provisioned on another request's nodes this way, leaving fewer
// nodes than the requests had asked for.
func TestProvisionedInstancesAreNotClaimedAgain(t *testing.T) {
	c := atomicCluster(1)
	a := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0)
	b := c.addRequest("b", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0.Add(time.Second))
	c.groups["g"] = view(3, "old=old") // both increases made, neither listed yet
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	if c.scaleCalls != 2 {
		t.Fatalf("%d scale-ups, want one per request", c.scaleCalls)
	}
	c.groups["g"] = view(3, "old=old", "i1=n1") // the first instance listed and registered
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, a, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	wantCond(t, b, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	wantCond(t, b, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2=n2")
	loop(p, c, t0.Add(3*time.Minute), nil, nil)
	wantCond(t, b, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	if got := fmt.Sprint(p.states[b.UID].nodes); got != "map[n2:true]" {
		t.Errorf("b's nodes %s, want n2 only", got)
	}
}

// An attempt's instance fails and is deleted (by the cleanup) before the
// attempt sees the failure. The attempt must not take the vanished
// instance for one renamed by the cloud and adopt a provisioned request's
// instance in its place.
func TestVanishedInstanceIsNotReplacedByAProvisionedOne(t *testing.T) {
	c := atomicCluster(1)
	a := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0)
	b := c.addRequest("b", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0.Add(time.Second))
	c.groups["g"] = view(3, "old=old")
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(3, "old=old", "i1=n1", "i2") // a claims i1 (registered), b claims i2
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, a, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	c.groups["g"] = view(2, "old=old", "i1=n1") // i2 failed and was deleted
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	if c := cond(t, b, provreq.ConditionProvisioned); c.Status == metav1.ConditionTrue {
		t.Fatalf("b is Provisioned (%s) on a's node", c.Message)
	}
	if len(c.rolledBack) != 1 || strings.Contains(undoString(c.rolledBack[0]), "i1") {
		t.Errorf("rollbacks %v, want b's attempt rolled back without a's instance", c.rolledBack)
	}
}

// A loop that rolls capacity back decides no request: its snapshot still
// holds the nodes just deleted (and the instances just cancelled as
// upcoming nodes), and a request answered on them would be Provisioned on
// capacity that is gone. A fault test on the local control plane saw
// all-or-nothing requests fit part of their pods on a rolled back
// attempt's nodes and end Provisioned with fewer nodes than they needed.
func TestNoRequestIsAnsweredInALoopThatRollsBack(t *testing.T) {
	c := atomicCluster(1, "i1")
	c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(2, "old=old") // i1 vanished: the attempt is rolled back
	c.fits = true
	b := c.addRequest("b", provreq.ClassCheckCapacity, 4, nil, t0.Add(time.Second))
	ctx := context.Background()
	fits := c.fitCalls
	l := p.Begin(ctx, Input{Now: t0.Add(time.Minute)})
	productive := l.Run(ctx, c, nil, c)
	l.Finish(ctx)
	if len(c.rolledBack) != 1 {
		t.Fatalf("rollbacks %v, want a's", c.rolledBack)
	}
	if cond(t, b, provreq.ConditionProvisioned) != nil || c.fitCalls != fits {
		t.Errorf("b answered (%v, %d fit checks) in the loop that rolled back", cond(t, b, provreq.ConditionProvisioned), c.fitCalls-fits)
	}
	if !productive {
		t.Error("the loop that rolled back does not ask for the next loop at once")
	}
	loop(p, c, t0.Add(time.Minute+time.Second), nil, nil)
	wantCond(t, b, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
}

// A rollback the provider keeps refusing holds the requests back for one
// loop only (its first call may have deleted something behind a lost
// answer); its retries that undo nothing do not, or the requests would wait
// until the rollback is given up.
func TestRefusedRollbackHoldsRequestsBackOnce(t *testing.T) {
	c := atomicCluster(1, "i1")
	c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 4, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(1, "old=old", "i1=n1")
	c.requests[0].CreationTimestamp = metav1.NewTime(t0.Add(-7 * 24 * time.Hour)) // expired: rolled back
	c.left = map[string]scaleup.Undo{"g": {Instances: []string{"i1"}}}            // the deletion fails
	c.fits = true
	b := c.addRequest("b", provreq.ClassCheckCapacity, 4, nil, t0.Add(time.Second))
	loop(p, c, t0.Add(time.Minute), nil, nil)
	if cond(t, b, provreq.ConditionProvisioned) != nil {
		t.Fatal("b answered in the loop of the rollback's first call")
	}
	c.left = map[string]scaleup.Undo{"g": {Instances: []string{"i1"}}} // refused again
	loop(p, c, t0.Add(time.Minute+time.Second), nil, nil)
	if len(c.rolledBack) != 2 {
		t.Fatalf("rollback calls %v, want the retry", c.rolledBack)
	}
	wantCond(t, b, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
}

// What a failed scale-up could not undo at once, in a group whose
// instances from before the increase are not known, is undone by name
// only: the group's other instances (here an old node and one listed
// since) are never taken for the attempt's.
func TestLeftoverWithoutTheGroupsInstancesBeforeDeletesOnlyNamedOnes(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Err: fmt.Errorf("quota"), Reason: "quota",
		Before: map[string][]string{}, Left: map[string]scaleup.Undo{"g": {Instances: []string{"i1"}, Unlisted: 1}}},
		groups: map[string]GroupView{"g": view(3, "old=old", "i1")}}
	c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(3, "old=old", "i1", "i2")
	loop(p, c, t0.Add(time.Second), nil, nil)
	if len(c.rolledBack) != 1 || undoString(c.rolledBack[0]) != "map[g:{[i1] 0}]" {
		t.Fatalf("rolled back %v, want i1 only", c.rolledBack)
	}
}
