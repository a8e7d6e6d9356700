package builder

import (
	"testing"

	apiv1 "k8s.io/api/core/v1"
)

// TestSpamKey: events on the status ConfigMap are told apart by message,
// others by reason and object, whatever their type or message (upstream's
// keys).
func TestSpamKey(t *testing.T) {
	key := spamKey("ns", "cluster-autoscaler-status")
	ev := func(kind, ns, name, typ, reason, msg string) *apiv1.Event {
		return &apiv1.Event{InvolvedObject: apiv1.ObjectReference{Kind: kind, Namespace: ns, Name: name},
			Type: typ, Reason: reason, Message: msg, Source: apiv1.EventSource{Component: "cluster-autoscaler"}}
	}
	status := func(reason, msg string) *apiv1.Event {
		return ev("ConfigMap", "ns", "cluster-autoscaler-status", apiv1.EventTypeNormal, reason, msg)
	}
	pod := func(typ, reason, msg string) *apiv1.Event { return ev("Pod", "ns", "p", typ, reason, msg) }
	records := func(reason, msg string) *apiv1.Event {
		return ev("ConfigMap", "ns", "cluster-autoscaler-provisioning-attempts", apiv1.EventTypeWarning, reason, msg)
	}
	for _, tc := range []struct {
		name string
		a, b *apiv1.Event
		same bool
	}{
		{"status: messages differ", status("ScaledUpGroup", "setting"), status("ScaledUpGroup", "set"), false},
		{"status: same message", status("A", "m"), status("B", "m"), true},
		{"pod: messages differ", pod(apiv1.EventTypeNormal, "NotTriggerScaleUp", "x"), pod(apiv1.EventTypeNormal, "NotTriggerScaleUp", "y"), true},
		{"pod: types differ", pod(apiv1.EventTypeNormal, "R", "x"), pod(apiv1.EventTypeWarning, "R", "x"), true},
		{"pod: reasons differ", pod(apiv1.EventTypeNormal, "TriggeredScaleUp", "x"), pod(apiv1.EventTypeNormal, "NotTriggerScaleUp", "x"), false},
		{"another ConfigMap", ev("ConfigMap", "ns", "other", "Normal", "R", "a"), ev("ConfigMap", "ns", "other", "Normal", "R", "b"), true},
		{"records: messages differ", records("R", "a"), records("R", "b"), false},
		{"records: same message", records("R", "a"), records("R", "a"), true},
		{"records: reasons differ", records("A", "m"), records("B", "m"), false},
	} {
		if got := key(tc.a) == key(tc.b); got != tc.same {
			t.Errorf("%s: same key = %v, want %v", tc.name, got, tc.same)
		}
	}
}
