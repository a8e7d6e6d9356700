package timers

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest/inprocess"
)

// TestBookingLastsItsDefaultTenMinutes: a check-capacity request that fits
// is Provisioned and its capacity booked for
// --provisioning-request-booking-time (upstream's 10 minutes): at 9m50s
// the booking still holds, at 10m05s it has expired
// (CapacityReservationTimeExpired), its pods never having come.
func TestBookingLastsItsDefaultTenMinutes(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	group := framework.UniqueName("booked")
	path := itest.GroupsConfig(e.Env, group)
	itest.GroupNode(e.Env, group, group+"-n", nil)
	opts := inprocess.Options(e.Env, path, func(o *config.Options) { o.EnableProvisioningRequests = true })
	if opts.ProvReqBookingTime != 10*time.Minute {
		t.Fatalf("the default booking time is %v, want upstream's 10m", opts.ProvReqBookingTime)
	}
	e.Request("booked", provreq.ClassCheckCapacity, nil, false,
		itest.PodSet{Name: "main", Count: 2, CPU: "1", Selector: map[string]string{"pool": group}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e.Env, clk, opts)
	waitCachedNodes(e.Env, p, group, 1)
	waitCachedRequest(e, p, "booked")
	p.CatchUp()
	p.RunOnce()
	e.Condition("booked", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 10*time.Second)
	provisioned := clk.Now()
	for _, step := range []time.Duration{5 * time.Minute, 4*time.Minute + 50*time.Second} { // 5m, 9m50s
		p.Step(step)
		waitCachedRequestCondition(e, p, "booked", provreq.ConditionProvisioned)
		p.RunOnce()
		pr, err := e.PRs.Get(e.Context(), "booked", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if c := provreq.FindCondition(pr.Status.Conditions, provreq.ConditionBookingExpired); c != nil {
			t.Fatalf("BookingExpired %s (%s) %v after the request was provisioned, within the booking time",
				c.Status, c.Reason, clk.Since(provisioned))
		}
	}
	p.Step(15 * time.Second) // 10m05s
	p.RunOnce()
	e.Condition("booked", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityReservationTimeExpired,
		10*time.Second)
}

// TestUnprovisionedRequestExpiresAfterItsDefaultWeek: an atomic request
// whose group is out of capacity waits, retried, and fails as Expired
// once --provisioning-request-expiry-time (a week) has passed since it was
// created; not before.
func TestUnprovisionedRequestExpiresAfterItsDefaultWeek(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	group := framework.UniqueName("full")
	path := itest.OneGroupConfig(e.Env, group, 5, "outOfCapacityAfter: 1") // one instance; the request needs two
	opts := inprocess.Options(e.Env, path, func(o *config.Options) { o.EnableProvisioningRequests = true })
	if opts.ProvReqExpiryTime != 7*24*time.Hour {
		t.Fatalf("the default expiry time is %v, want upstream's 7 days", opts.ProvReqExpiryTime)
	}
	e.Request("waiting", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 8, CPU: "1", Selector: map[string]string{"pool": group}})
	clk := clocktesting.NewFakeClock(time.Now())
	p := inprocess.Start(e.Env, clk, opts)
	waitCachedRequest(e, p, "waiting")
	p.CatchUp()
	created := clk.Now()
	p.RunOnce()
	e.Condition("waiting", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 30*time.Second)
	for _, step := range []time.Duration{24 * time.Hour, 5 * 24 * time.Hour, 23*time.Hour + 50*time.Minute} { // to 6d23h50m
		p.Step(step)
		p.RunOnce()
		pr, err := e.PRs.Get(e.Context(), "waiting", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionFailed) {
			t.Fatalf("the request failed %v after it was created, within the expiry time: %+v", clk.Since(created),
				provreq.FindCondition(pr.Status.Conditions, provreq.ConditionFailed))
		}
	}
	p.Step(15 * time.Minute) // 7d05m
	p.RunOnce()
	e.Condition("waiting", provreq.ConditionFailed, metav1.ConditionTrue, provreq.ReasonExpired, 10*time.Second)
	if got := itest.NodesPerPool(e.Env)[group]; got != 0 {
		t.Errorf("%d nodes of the full group left behind", got)
	}
}

// waitCachedRequest waits until the loop's ProvisioningRequest informer holds name.
func waitCachedRequest(e *itest.ProvreqEnv, p *inprocess.Autoscaler, name string) {
	e.T.Helper()
	e.Eventually(30*time.Second, "the request in the loop's cache", func(context.Context) (bool, error) {
		_, ok, err := p.Loop.ProvReqInformer.GetIndexer().GetByKey(e.Namespace + "/" + name)
		return ok, err
	})
}

// waitCachedRequestCondition waits until the loop's cache of the request
// has the condition the API server's copy has (the loop's last write).
func waitCachedRequestCondition(e *itest.ProvreqEnv, p *inprocess.Autoscaler, name, typ string) {
	e.T.Helper()
	e.Eventually(30*time.Second, "the request's condition in the loop's cache", func(ctx context.Context) (bool, error) {
		pr, err := e.PRs.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		objs := p.Loop.ProvReqInformer.GetIndexer().List()
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok && m.GetName() == name && m.GetNamespace() == e.Namespace {
				return m.GetResourceVersion() == pr.ResourceVersion, nil
			}
		}
		return false, nil
	})
}
