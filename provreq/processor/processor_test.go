package processor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/scaleup"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// cluster is the fake world of one test: requests, templates, what the
// session answers, and what was written.
type cluster struct {
	requests  []*v1.ProvisioningRequest
	templates map[string]*apiv1.PodTemplate
	fits      bool
	// refusal is what FitAll says when the pods do not fit.
	refusal   string
	atomic    scaleup.AtomicResult
	placeRest int // pods Place leaves over
	groups    map[string]GroupView
	left      map[string]scaleup.Undo // what the next rollback leaves undone
	// recorded
	fitCalls, scaleCalls int
	placed               int
	lastPlaced           [][]*apiv1.Pod
	deleted              []string
	rolledBack           []map[string]scaleup.Undo
	writes               int
	templateGets         int
	// staleCache keeps the requests List returns as they were: the
	// informer has not seen the writes (they go to written).
	staleCache bool
	written    map[string]v1.ProvisioningRequestStatus
}

func (c *cluster) List(labels.Selector) ([]*v1.ProvisioningRequest, error) { return c.requests, nil }

func (c *cluster) Get(namespace, name string) (*apiv1.PodTemplate, error) {
	c.templateGets++
	if t := c.templates[namespace+"/"+name]; t != nil {
		return t, nil
	}
	return nil, errors.New("not found")
}

func (c *cluster) ApplyStatus(_ context.Context, namespace, name string, st v1.ProvisioningRequestStatus) error {
	c.writes++
	if c.staleCache {
		if c.written == nil {
			c.written = map[string]v1.ProvisioningRequestStatus{}
		}
		c.written[namespace+"/"+name] = *st.DeepCopy()
		return nil
	}
	for _, pr := range c.requests {
		if pr.Namespace == namespace && pr.Name == name {
			pr.Status = *st.DeepCopy()
		}
	}
	return nil
}

func (c *cluster) Delete(_ context.Context, namespace, name string, _ types.UID) error {
	c.deleted = append(c.deleted, namespace+"/"+name)
	return nil
}

func (c *cluster) Place(_ context.Context, sets [][]*apiv1.Pod, _ bool) []*apiv1.Pod {
	pods := flatten(sets)
	c.placed += len(pods)
	c.lastPlaced = sets
	return pods[:min(c.placeRest, len(pods))]
}

func (c *cluster) FitAll(context.Context, [][]*apiv1.Pod, bool) (bool, string) {
	c.fitCalls++
	if c.fits {
		return true, ""
	}
	return false, c.refusal
}

// ScaleUpAll hands the increases of c.atomic to record first, as the
// session does, and makes none when record fails.
func (c *cluster) ScaleUpAll(ctx context.Context, _ []*apiv1.Pod, record scaleup.RecordFunc) scaleup.AtomicResult {
	c.scaleCalls++
	if record != nil && len(c.atomic.Increases) > 0 {
		var planned []scaleup.Planned
		for _, inc := range c.atomic.Increases {
			planned = append(planned, scaleup.Planned{NodeGroup: inc.NodeGroup, From: inc.From, To: inc.To,
				Before: c.atomic.Before[inc.NodeGroup]})
		}
		if err := record(ctx, planned); err != nil {
			return scaleup.AtomicResult{Err: err, Reason: err.Error() + "; nothing was increased"}
		}
	}
	return c.atomic
}

func (c *cluster) NodeGroup(id string) (GroupView, bool) {
	v, ok := c.groups[id]
	return v, ok
}

func (c *cluster) rollback(_ context.Context, undo map[string]scaleup.Undo, _ string) (map[string]scaleup.Undo, error) {
	c.rolledBack = append(c.rolledBack, undo)
	left := c.left
	c.left = nil
	return left, nil
}

// view is a group of target size target whose listed instances are given
// as id or id=node (registered as that node).
func view(target int, instances ...string) GroupView {
	v := GroupView{Target: target}
	for _, in := range instances {
		id, node, _ := strings.Cut(in, "=")
		st := InstanceState{Id: id}
		if node != "" {
			st.Node = &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
		}
		v.Instances = append(v.Instances, st)
	}
	return v
}

func (c *cluster) addRequest(name, class string, count int32, params map[string]string, created time.Time) *v1.ProvisioningRequest {
	tmpl := "ppt-" + name
	if c.templates == nil {
		c.templates = map[string]*apiv1.PodTemplate{}
	}
	c.templates["ns/"+tmpl] = &apiv1.PodTemplate{Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{
		Containers: []apiv1.Container{{Name: "c", Resources: apiv1.ResourceRequirements{
			Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}}}}}}}
	pr := &v1.ProvisioningRequest{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			CreationTimestamp: metav1.NewTime(created)},
		Spec: v1.ProvisioningRequestSpec{ProvisioningClassName: class, Parameters: map[string]v1.Parameter{},
			PodSets: []v1.PodSet{{PodTemplateRef: v1.Reference{Name: tmpl}, Count: count}}},
	}
	for k, v := range params {
		pr.Spec.Parameters[k] = v1.Parameter(v)
	}
	c.requests = append(c.requests, pr)
	return pr
}

func testOptions() Options {
	return Options{BookingTime: 10 * time.Minute, TemplateGracePeriod: time.Minute, ExpiryTime: 7 * 24 * time.Hour,
		RetentionTime: 7 * 24 * time.Hour, InitialBackoff: time.Minute, MaxBackoff: 4 * time.Minute,
		MaxBackoffEntries: 100, CheckCapacityTimebox: time.Minute, MaxNodeProvisionTime: 15 * time.Minute}
}

func newTestProcessor(c *cluster, mutate func(*Options)) *Processor {
	o := testOptions()
	if mutate != nil {
		mutate(&o)
	}
	return New(o, c, c, c, c.rollback)
}

// loop runs one loop at now with the given scheduled and pending pods.
func loop(p *Processor, c *cluster, now time.Time, scheduled, pending []*apiv1.Pod) *Loop {
	ctx := context.Background()
	l := p.Begin(ctx, Input{Now: now, ScheduledPods: scheduled, PendingPods: pending})
	l.Run(ctx, c, nil, c)
	l.Finish(ctx)
	return l
}

func cond(t *testing.T, pr *v1.ProvisioningRequest, typ string) *metav1.Condition {
	t.Helper()
	return provreq.FindCondition(pr.Status.Conditions, typ)
}

func wantCond(t *testing.T, pr *v1.ProvisioningRequest, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := cond(t, pr, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Fatalf("%s: %s = %+v, want %s/%s", pr.Name, typ, c, status, reason)
	}
}

func consumer(request string, scheduled bool) *apiv1.Pod {
	p := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w-" + request,
		Annotations: map[string]string{provreq.ConsumeAnnotation: request}}}
	if scheduled {
		p.Spec.NodeName = "n1"
	}
	return p
}

func TestCheckCapacityProvisionsBooksAndIsConsumed(t *testing.T) {
	c := &cluster{fits: true}
	pr := c.addRequest("a", provreq.ClassCheckCapacity, 2, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0.Add(time.Second), nil, nil)
	wantCond(t, pr, provreq.ConditionAccepted, metav1.ConditionTrue, provreq.ReasonAccepted)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)

	// Next loop: its 2 pods are booked; one consumer is scheduled, so one is booked.
	c.placed = 0
	loop(p, c, t0.Add(2*time.Second), []*apiv1.Pod{consumer("a", true)}, nil)
	if c.placed != 1 || c.fitCalls != 1 {
		t.Errorf("placed %d booked pods and checked %d times; want 1 and 1", c.placed, c.fitCalls)
	}
	if cond(t, pr, provreq.ConditionBookingExpired) != nil {
		t.Fatal("booking ended with a pod still to come")
	}
	// Both consumers scheduled: the booking is consumed.
	loop(p, c, t0.Add(3*time.Second), []*apiv1.Pod{consumer("a", true), consumer("a", true)}, nil)
	wantCond(t, pr, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed)
}

func TestBookingExpiresAndLostCapacityIsRevoked(t *testing.T) {
	c := &cluster{fits: true}
	expiring := c.addRequest("expiring", provreq.ClassCheckCapacity, 2, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	loop(p, c, t0.Add(11*time.Minute), nil, nil)
	wantCond(t, expiring, provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired)

	c = &cluster{fits: true}
	lost := c.addRequest("lost", provreq.ClassCheckCapacity, 3, nil, t0)
	p = newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.placeRest = 1 // one booked pod no longer fits
	loop(p, c, t0.Add(time.Minute), nil, nil)
	wantCond(t, lost, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonCapacityLost)
}

func TestCheckCapacityRetriesWithBackoffOrFailsWithNoRetry(t *testing.T) {
	c := &cluster{fits: false}
	retry := c.addRequest("retry", provreq.LegacyClassCheckCapacity, 2, nil, t0)
	once := c.addRequest("once", provreq.ClassCheckCapacity, 2, map[string]string{"noRetry": "true"}, t0.Add(time.Second))
	p := newTestProcessor(c, nil)
	now := t0.Add(time.Minute)
	loop(p, c, now, nil, nil)
	wantCond(t, retry, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	wantCond(t, once, provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonCapacityIsNotFound)
	if c.fitCalls != 2 {
		t.Fatalf("%d checks, want 2", c.fitCalls)
	}
	// Backoff 1m, 2m, 4m, 4m: a check happens only once each has passed.
	checks := 2
	for _, wait := range []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 4 * time.Minute} {
		loop(p, c, now.Add(wait-time.Second), nil, nil)
		if c.fitCalls != checks {
			t.Fatalf("checked again %v before the backoff of %v ended", time.Second, wait)
		}
		now = now.Add(wait)
		loop(p, c, now, nil, nil)
		checks++
		if c.fitCalls != checks {
			t.Fatalf("not checked again after the backoff of %v", wait)
		}
	}
	if c.writes > 2+2+5 {
		t.Errorf("%d status writes; the statuses change once per check at most", c.writes)
	}
}

func TestMissingTemplateIsWaitedForThenFails(t *testing.T) {
	c := &cluster{fits: true}
	late := c.addRequest("late", provreq.ClassCheckCapacity, 1, nil, t0)
	never := c.addRequest("never", provreq.ClassCheckCapacity, 1, nil, t0)
	lateTemplate := c.templates["ns/ppt-late"]
	delete(c.templates, "ns/ppt-late")
	delete(c.templates, "ns/ppt-never")
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	wantCond(t, late, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonWaitingForPodTemplates)
	c.templates["ns/ppt-late"] = lateTemplate
	loop(p, c, t0.Add(30*time.Second), nil, nil)
	wantCond(t, late, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	loop(p, c, t0.Add(61*time.Second), nil, nil)
	wantCond(t, never, provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonFailedToCreatePods)
	if !strings.Contains(cond(t, never, provreq.ConditionFailed).Message, "ppt-never") {
		t.Errorf("the failure does not name the missing template: %s", cond(t, never, provreq.ConditionFailed).Message)
	}
}

func TestExpiryValidUntilAndBadParameters(t *testing.T) {
	c := &cluster{fits: false, atomic: scaleup.AtomicResult{Reason: "no room"}}
	old := c.addRequest("old", provreq.ClassCheckCapacity, 1, nil, t0.Add(-8*24*time.Hour))
	valid := c.addRequest("valid", provreq.ClassBestEffortAtomicScaleUp, 1, map[string]string{"ValidUntilSeconds": "60",
		"maxRunDurationSeconds": "3600"}, t0)
	bad := c.addRequest("bad", provreq.ClassBestEffortAtomicScaleUp, 1, map[string]string{"ValidUntilSeconds": "soon"}, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0.Add(time.Second), nil, nil)
	wantCond(t, old, provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired)
	wantCond(t, bad, provreq.ConditionFailed, metav1.ConditionTrue, ReasonInvalidParameters)
	wantCond(t, valid, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
	loop(p, c, t0.Add(61*time.Second), nil, nil)
	wantCond(t, valid, provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired)
	// Finished requests are deleted after the retention time, not before.
	loop(p, c, t0.Add(6*24*time.Hour), nil, nil)
	if len(c.deleted) != 0 {
		t.Fatalf("deleted %v before the retention time", c.deleted)
	}
	loop(p, c, t0.Add(8*24*time.Hour), nil, nil)
	if len(c.deleted) != 3 {
		t.Errorf("deleted %v, want the three finished requests", c.deleted)
	}
}

func TestUnknownClassesAndProcessorInstances(t *testing.T) {
	c := &cluster{fits: true}
	foreign := c.addRequest("foreign", "queued-provisioning.gke.io", 1, nil, t0)
	mine := c.addRequest("mine", provreq.ClassCheckCapacity, 1, map[string]string{"processorInstance": "second"}, t0)
	plain := c.addRequest("plain", provreq.ClassCheckCapacity, 1, nil, t0)
	atomic := c.addRequest("atomic", provreq.ClassBestEffortAtomicScaleUp, 1, nil, t0)
	p := newTestProcessor(c, func(o *Options) { o.ProcessorInstance = "second" })
	loop(p, c, t0, nil, nil)
	if len(foreign.Status.Conditions) != 0 || len(plain.Status.Conditions) != 0 || len(atomic.Status.Conditions) != 0 {
		t.Errorf("an instance touched requests that are not its own: %v %v %v", foreign.Status.Conditions,
			plain.Status.Conditions, atomic.Status.Conditions)
	}
	wantCond(t, mine, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
	// The default instance leaves mine alone and handles the others but the foreign one.
	c2 := &cluster{fits: true, requests: []*v1.ProvisioningRequest{foreign, plain}, templates: c.templates}
	loop(newTestProcessor(c2, nil), c2, t0, nil, nil)
	if len(foreign.Status.Conditions) != 0 {
		t.Error("an unknown class got conditions")
	}
	wantCond(t, plain, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
}

func TestConsumingPodsAreSetAsideOnlyWhileTheirRequestLives(t *testing.T) {
	c := &cluster{fits: true}
	c.addRequest("live", provreq.ClassCheckCapacity, 2, nil, t0)
	failed := c.addRequest("failed", provreq.ClassCheckCapacity, 2, nil, t0)
	failed.Status.Conditions = []metav1.Condition{{Type: provreq.ConditionFailed, Status: metav1.ConditionTrue,
		Reason: provreq.ReasonExpired, LastTransitionTime: metav1.NewTime(t0)}}
	p := newTestProcessor(c, nil)
	ordinary := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "ordinary"}}
	pending := []*apiv1.Pod{consumer("live", false), consumer("failed", false), consumer("missing", false), ordinary}
	l := loop(p, c, t0, nil, pending)
	if !l.SetAside(pending[0]) || l.SetAside(pending[1]) || l.SetAside(pending[2]) {
		t.Errorf("set aside: live %v failed %v missing %v; want only the live one", l.SetAside(pending[0]),
			l.SetAside(pending[1]), l.SetAside(pending[2]))
	}
	if got := len(l.Pending()); got != 3 {
		t.Errorf("%d pods left for the ordinary scale-up, want 3", got)
	}
}

func TestAtomicAttemptIsWatchedProvisionedAndRevoked(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 0, To: 2}},
		Instances: map[string][]string{"g": {"i1", "i2"}}}, groups: map[string]GroupView{}}
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 8, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	if got := pr.Status.ProvisioningClassDetails[DetailNodeGroups]; got != "g" {
		t.Errorf("nodeGroups detail %q, want g", got)
	}
	// One registered: still waiting, and the attempt is not made again.
	n1 := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	c.groups["g"] = view(2, "i1=n1", "i2")
	loop(p, c, t0.Add(time.Minute), nil, nil)
	if c.scaleCalls != 1 {
		t.Fatalf("%d scale-ups, want 1", c.scaleCalls)
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	n2 := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}
	c.groups["g"] = view(2, "i1=n1", "i2=n2")
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	// Its nodes are there: booked. Then n2 is deleted: revoked.
	ctx := context.Background()
	l := p.Begin(ctx, Input{Now: t0.Add(3 * time.Minute)})
	l.Run(ctx, c, []*apiv1.Node{n1, n2}, c)
	l.Finish(ctx)
	if cond(t, pr, provreq.ConditionCapacityRevoked) != nil {
		t.Fatal("revoked with all its nodes present")
	}
	l = p.Begin(ctx, Input{Now: t0.Add(4 * time.Minute)})
	l.Run(ctx, c, []*apiv1.Node{n1}, c)
	l.Finish(ctx)
	wantCond(t, pr, provreq.ConditionCapacityRevoked, metav1.ConditionTrue, ReasonCapacityLost)
}

func TestAtomicAttemptRollsBackOnFailureAndTimeout(t *testing.T) {
	for _, tc := range []struct {
		name  string
		group GroupView
		at    time.Duration
		text  string
	}{
		{name: "creation error", group: GroupView{Target: 1, Instances: []InstanceState{{Id: "i1", Error: "STOCKOUT: no capacity"}}},
			at: time.Minute, text: "STOCKOUT"},
		{name: "vanished", group: view(1), at: time.Minute, text: "disappeared"},
		// Deleted by the cleanup as never registered: the attempt timed out.
		{name: "vanished after the provision time", group: view(1), at: 16 * time.Minute, text: "not ready within 15m0s"},
		{name: "never registers", group: view(1, "i1"), at: 16 * time.Minute, text: "not ready within 15m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", To: 1}},
				Instances: map[string][]string{"g": {"i1"}}}, groups: map[string]GroupView{}}
			pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 2, nil, t0)
			p := newTestProcessor(c, nil)
			loop(p, c, t0, nil, nil)
			c.groups["g"] = tc.group
			loop(p, c, t0.Add(tc.at), nil, nil)
			if len(c.rolledBack) != 1 || fmt.Sprint(c.rolledBack[0]) != "map[g:{[i1] 0}]" {
				t.Fatalf("rolled back %v, want the attempt's instance", c.rolledBack)
			}
			wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound)
			if msg := cond(t, pr, provreq.ConditionProvisioned).Message; !strings.Contains(msg, tc.text) ||
				!strings.Contains(msg, "rolled back") {
				t.Errorf("message %q does not explain the rollback (%s)", msg, tc.text)
			}
			// Retried after the backoff.
			loop(p, c, t0.Add(tc.at+2*time.Minute), nil, nil)
			if c.scaleCalls != 2 {
				t.Errorf("%d attempts, want a retry", c.scaleCalls)
			}
		})
	}
}

// TestAtomicAttemptFollowsRenamedInstances: an instance first listed under a
// placeholder id and then under its real one (a Cluster API Machine getting
// its provider ID) is the same instance: no rollback, and the request is
// Provisioned once it registers; an unrelated instance that was there before
// the attempt is never taken for it.
func TestAtomicAttemptFollowsRenamedInstances(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Fit: true, Increases: []scaleup.Increase{{NodeGroup: "g", From: 1, To: 2}},
		Before: map[string][]string{"g": {"old"}}, Instances: map[string][]string{"g": {"placeholder://i1"}}},
		groups: map[string]GroupView{}}
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 2, nil, t0)
	p := newTestProcessor(c, nil)
	loop(p, c, t0, nil, nil)
	c.groups["g"] = view(2, "old=n0", "placeholder://i1")
	loop(p, c, t0.Add(time.Minute), nil, nil)
	c.groups["g"] = view(2, "old=n0", "cloud://i1")
	loop(p, c, t0.Add(2*time.Minute), nil, nil)
	if len(c.rolledBack) != 0 {
		t.Fatalf("rolled back %v after a rename", c.rolledBack)
	}
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionFalse, ReasonProvisioningInProgress)
	c.groups["g"] = view(2, "old=n0", "cloud://i1=n1")
	loop(p, c, t0.Add(3*time.Minute), nil, nil)
	wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned)
	if len(c.rolledBack) != 0 {
		t.Errorf("rolled back %v", c.rolledBack)
	}
}

func TestAtomicThatCanNeverFitFails(t *testing.T) {
	c := &cluster{atomic: scaleup.AtomicResult{Permanent: true, Reason: "larger than every group"}}
	pr := c.addRequest("a", provreq.ClassBestEffortAtomicScaleUp, 2, nil, t0)
	loop(newTestProcessor(c, nil), c, t0, nil, nil)
	wantCond(t, pr, provreq.ConditionFailed, metav1.ConditionTrue, ReasonCapacityCanNeverFit)
}

// With --check-capacity-batch-processing, at most
// --check-capacity-provisioning-request-max-batch-size check-capacity
// requests are answered per loop, oldest first, and the loop asks for the
// next one at once; without a cap every eligible request is answered.
func TestCheckCapacityCapPerLoop(t *testing.T) {
	for _, tc := range []struct {
		cap, wantFirst int
	}{{0, 3}, {2, 2}, {1, 1}} {
		c := &cluster{fits: true}
		var prs []*v1.ProvisioningRequest
		for i := 0; i < 3; i++ {
			prs = append(prs, c.addRequest(fmt.Sprintf("r%d", i), provreq.ClassCheckCapacity, 1, nil, t0.Add(time.Duration(i)*time.Second)))
		}
		p := newTestProcessor(c, func(o *Options) { o.CheckCapacityMaxPerLoop = tc.cap })
		ctx := context.Background()
		l := p.Begin(ctx, Input{Now: t0.Add(time.Minute)})
		again := l.Run(ctx, c, nil, c)
		l.Finish(ctx)
		provisioned := 0
		for i, pr := range prs {
			if c := cond(t, pr, provreq.ConditionProvisioned); c != nil && c.Status == metav1.ConditionTrue {
				provisioned++
				if i >= tc.wantFirst {
					t.Errorf("cap %d: %s answered before an older request", tc.cap, pr.Name)
				}
			}
		}
		if provisioned != tc.wantFirst || again != (tc.wantFirst < 3) {
			t.Errorf("cap %d: %d provisioned in the first loop (next loop at once: %v), want %d", tc.cap, provisioned, again, tc.wantFirst)
		}
		loop(p, c, t0.Add(2*time.Minute), nil, nil)
		loop(p, c, t0.Add(3*time.Minute), nil, nil)
		for _, pr := range prs {
			wantCond(t, pr, provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound)
		}
	}
}
