package aws

import (
	"context"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// interruptionProvider is a provider over one group of two instances
// reading queue "interruptions" (by name) of the fake.
func interruptionProvider(t *testing.T, rebalance bool) (*awsfake.Server, *Provider, []awsfake.Instance) {
	t.Helper()
	s := startFake(t)
	s.CreateQueue("interruptions")
	s.AddGroup(groupOf("spot", 2))
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := newTestProvider(t, []string{"0:10:spot"}, nil, WithInterruptionQueue(newSQSClient(cfg, cloudConfig{}), "interruptions", rebalance))
	var ins []awsfake.Instance
	refreshUntil(t, p, "two instances", func() bool {
		ins = s.Instances("spot")
		return len(group(t, p, "spot").instances) == 2 && len(ins) == 2
	})
	return s, p, ins
}

func poll(t *testing.T, p *Provider) ([]cloudprovider.InterruptionNotice, []cloudprovider.DroppedNotice) {
	t.Helper()
	pending, dropped, err := p.PollInterruptions(context.Background())
	if err != nil {
		t.Fatalf("PollInterruptions: %v", err)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].Instance < pending[j].Instance })
	return pending, dropped
}

func TestInterruptionNoticesAndAck(t *testing.T) {
	s, p, ins := interruptionProvider(t, false)
	a, b := ins[0], ins[1]
	s.SendSpotInterruption("interruptions", a.ID)
	s.SendStateChange("interruptions", b.ID, "stopping")
	pending, dropped := poll(t, p)
	if len(dropped) != 0 || len(pending) != 2 {
		t.Fatalf("pending %+v dropped %+v, want 2 notices and none dropped", pending, dropped)
	}
	byKind := map[cloudprovider.InterruptionKind]cloudprovider.InterruptionNotice{}
	for _, n := range pending {
		byKind[n.Kind] = n
	}
	spot := byKind[cloudprovider.SpotInterruption]
	if spot.Instance != providerID(a.Zone, a.ID) || spot.Group != "spot" || spot.InstanceType != "m5.large" || spot.Zone != a.Zone {
		t.Errorf("spot notice %+v, want instance %s of group spot, m5.large in %s", spot, providerID(a.Zone, a.ID), a.Zone)
	}
	if d := spot.Deadline.Sub(spot.Time); d != 2*time.Minute {
		t.Errorf("spot notice deadline %v after its time, want 2m", d)
	}
	if st := byKind[cloudprovider.StateChange]; st.Instance != providerID(b.Zone, b.ID) || st.Group != "spot" {
		t.Errorf("state-change notice %+v", st)
	}
	// Not acknowledged: still pending at the next poll, still on the
	// queue (hidden), not read twice.
	again, _ := poll(t, p)
	if len(again) != 2 || len(s.QueueMessages("interruptions")) != 2 {
		t.Fatalf("after a second poll: pending %d, queue %d; want 2 and 2", len(again), len(s.QueueMessages("interruptions")))
	}
	if err := p.AckInterruptions(context.Background(), []string{spot.ID}); err != nil {
		t.Fatal(err)
	}
	left, _ := poll(t, p)
	if len(left) != 1 || left[0].Kind != cloudprovider.StateChange || len(s.QueueMessages("interruptions")) != 1 {
		t.Errorf("after the ack: pending %+v, queue %d; want the state change only", left, len(s.QueueMessages("interruptions")))
	}
}

func TestInterruptionDropped(t *testing.T) {
	s, p, ins := interruptionProvider(t, false)
	q := "interruptions"
	s.SendMessage(q, "not json")
	s.SendMessage(q, `{"detail-type":"Something Else","source":"aws.s3","detail":{}}`)
	s.SendMessage(q, `{"detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","detail":{"instance-action":"terminate"}}`)
	s.SendSpotInterruption(q, "i-0000000000000000f") // no managed group's
	s.SendRebalance(q, ins[0].ID)                    // the switch is off
	s.SendStateChange(q, ins[0].ID, "running")
	s.SendScheduledChange(q, "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", time.Now().Add(time.Hour), "i-0000000000000000e")
	pending, dropped := poll(t, p)
	if len(pending) != 0 {
		t.Errorf("pending %+v, want none", pending)
	}
	var got []string
	for _, d := range dropped {
		got = append(got, d.Kind+"/"+d.Action)
	}
	slices.Sort(got)
	want := []string{"rebalance/ignored", "scheduled_change/foreign", "spot_interruption/foreign", "spot_interruption/malformed",
		"state_change/ignored", "unknown/malformed", "unknown/unknown"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("dropped (-want +got):\n%s", diff)
	}
	if left := s.QueueMessages(q); len(left) != 0 {
		t.Errorf("dropped messages left on the queue: %v", left)
	}
}

func TestInterruptionRebalanceAndHealth(t *testing.T) {
	s, p, ins := interruptionProvider(t, true)
	s.SendRebalance("interruptions", ins[0].ID)
	start := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	s.SendScheduledChange("interruptions", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", start, ins[1].ID, "i-0000000000000000e")
	pending, dropped := poll(t, p)
	if len(dropped) != 0 || len(pending) != 2 {
		t.Fatalf("pending %+v dropped %+v", pending, dropped)
	}
	var health cloudprovider.InterruptionNotice
	for _, n := range pending {
		if n.Kind == cloudprovider.ScheduledChange {
			health = n
		}
	}
	if health.Instance != providerID(ins[1].Zone, ins[1].ID) || !health.Deadline.Equal(start) {
		t.Errorf("scheduled change %+v, want instance %s deadline %v (the foreign entity left out)", health, ins[1].ID, start)
	}
	if err := p.AckInterruptions(context.Background(), []string{health.ID}); err != nil {
		t.Fatal(err)
	}
	if n := len(s.QueueMessages("interruptions")); n != 1 {
		t.Errorf("%d messages on the queue after acking the health event, want the rebalance only", n)
	}
}

func TestInterruptionQueueByURLAndBounds(t *testing.T) {
	s := startFake(t)
	url := s.CreateQueue("by-url")
	s.AddGroup(groupOf("spot", 1))
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := newTestProvider(t, []string{"0:10:spot"}, nil, WithInterruptionQueue(newSQSClient(cfg, cloudConfig{}), url, false))
	// Nothing is read before the first Refresh (every instance would look
	// foreign).
	s.SendStateChange("by-url", "i-00000000000000001", "running")
	if _, dropped := poll(t, p); len(dropped) != 0 || s.Calls()["ReceiveMessage"] != 0 {
		t.Fatalf("before the first Refresh: dropped %v, ReceiveMessage calls %d", dropped, s.Calls()["ReceiveMessage"])
	}
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 45; i++ {
		s.SendStateChange("by-url", "i-00000000000000001", "running")
	}
	_, dropped := poll(t, p)
	if len(dropped) != receivesPerPoll*sqsBatch || s.Calls()["GetQueueUrl"] != 0 {
		t.Errorf("one poll dropped %d (want %d: bounded), GetQueueUrl calls %d (want 0: a URL)", len(dropped),
			receivesPerPoll*sqsBatch, s.Calls()["GetQueueUrl"])
	}
	if n := len(s.QueueMessages("by-url")); n != 46-receivesPerPoll*sqsBatch {
		t.Errorf("%d messages left, want %d", n, 46-receivesPerPoll*sqsBatch)
	}
}

func TestInterruptionQueueMissing(t *testing.T) {
	s := startFake(t)
	s.AddGroup(groupOf("spot", 1))
	cfg, err := loadConfig(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	p := newTestProvider(t, []string{"0:10:spot"}, nil, WithInterruptionQueue(newSQSClient(cfg, cloudConfig{}), "nope", false))
	if err := p.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := p.PollInterruptions(context.Background()); err == nil {
		t.Errorf("PollInterruptions on a queue that does not exist succeeded")
	}
	if New(nil, nil, "r", nil, nil).InterruptionSource() != nil {
		t.Errorf("a provider without a queue offers an InterruptionSource")
	}
}
