package builder

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"k8s.io/autoscaler/cluster-autoscaler/config"
)

// TestEventBroadcasterOutlivesTheSignal: an event recorded after the
// process' context is cancelled (a SIGTERM), during the shutdown, is still
// delivered until the owner shuts the broadcaster down; before, the leader
// election's "stopped leading" event logged "Unable to record event ...
// broadcaster already stopped" on every clean exit (issue 30).
func TestEventBroadcasterOutlivesTheSignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	b := NewEventBroadcaster(ctx, config.Defaults())
	defer b.Shutdown()
	got := make(chan *apiv1.Event, 1)
	w := b.StartEventWatcher(func(e *apiv1.Event) {
		select {
		case got <- e:
		default:
		}
	})
	defer w.Stop()
	rec := b.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler"})
	cancel()
	time.Sleep(100 * time.Millisecond) // let a context-bound broadcaster notice the cancellation
	rec.Event(&apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lock"}}, apiv1.EventTypeNormal,
		"LeaderElection", "stopped leading")
	select {
	case e := <-got:
		if e.Message != "stopped leading" {
			t.Errorf("event %q, want the one recorded", e.Message)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the event recorded after the context ended was not delivered")
	}
}
