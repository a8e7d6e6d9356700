package explain

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestBookedNodeOutlivesItsLifetime: with --max-node-lifetime, a node of
// another group past the lifetime is replaced (the engine runs), while the
// node a provisioned all-or-nothing ProvisioningRequest books is kept past
// its lifetime as long as the booking lasts, and /explainz says it is held
// back for the request.
func TestBookedNodeOutlivesItsLifetime(t *testing.T) {
	const lifetime = 30 * time.Second
	e := itest.NewProvreqEnv(t)
	ctl, booked := framework.UniqueName("ctl"), framework.UniqueName("pr")
	path := itest.GroupsConfig(e.Env, ctl, booked)
	control := ctl + "-n"
	itest.GroupNode(e.Env, ctl, control, nil)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ScaleUpArgs(e.Env, path, "--enable-provisioning-requests",
		"--max-node-lifetime="+lifetime.String(), "--disruption-settle-time=0s", "--provisioning-request-booking-time=1h")...)
	e.Request("job", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: map[string]string{"pool": booked}})
	e.Condition("job", provreq.ConditionProvisioned, metav1.ConditionTrue, "", 60*time.Second)
	names := itest.NodeNames(e.Env, booked)
	if len(names) != 1 {
		t.Fatalf("nodes of group %s: %v, want the request's one", booked, names)
	}
	held := names[0]
	n, err := e.Client.CoreV1().Nodes().Get(e.Context(), held, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := n.CreationTimestamp.Time

	e.Eventually(lifetime+60*time.Second, "the control node replaced once past its lifetime", func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Nodes().Get(ctx, control, metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	// The booked node past its lifetime by several loops: still there,
	// never cordoned, and explained as held for the request.
	time.Sleep(time.Until(created.Add(lifetime + 10*time.Second)))
	var got explain.NodeVerdict
	var last string
	e.Eventually(30*time.Second, "the booked node explained as held for the request", func(ctx context.Context) (bool, error) {
		code, body, err := p.Explainz(ctx, "format=json&node="+held)
		if err != nil || code != http.StatusOK {
			return false, nil
		}
		last, got = body, explain.NodeVerdict{}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			return false, err
		}
		for _, d := range got.Disruptions {
			if d.Reason == "expired" && d.Decision == explain.DecisionHeld && d.HeldBy == explain.HeldByProtection &&
				strings.Contains(d.Hold, "ProvisioningRequest "+e.Namespace+"/job") {
				return true, nil
			}
		}
		return false, nil
	})
	if t.Failed() {
		t.Logf("last /explainz answer: %s", last)
	}
	n, err = e.Client.CoreV1().Nodes().Get(e.Context(), held, metav1.GetOptions{})
	if err != nil || n.Spec.Unschedulable || len(n.Spec.Taints) != 0 {
		t.Errorf("booked node %s at %v of age: %v; want it kept, untouched", held, time.Since(created).Round(time.Second), err)
	}
	if names := itest.NodeNames(e.Env, booked); len(names) != 1 {
		t.Errorf("nodes of group %s: %v; want only the booked one (no replacement asked for)", booked, names)
	}
}
