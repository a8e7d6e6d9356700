package explain

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// explainedRequest is /explainz?provisioningrequest=...&format=json.
type explainedRequest struct {
	At         time.Time           `json:"at"`
	Conditions []explain.Condition `json:"conditions"`
	PodGroups  []explain.PodGroup  `json:"podGroups"`
}

// explainRequest waits until the autoscaler's /explainz record of request
// (in the test's namespace) satisfies ok, and returns it.
func explainRequest(e *framework.Env, p *itest.AutoscalerProcess, request, what string, ok func(explainedRequest) bool) explainedRequest {
	e.T.Helper()
	var got explainedRequest
	var last string
	defer func() {
		if e.T.Failed() {
			e.T.Logf("last /explainz answer for %s: %s", request, last)
		}
	}()
	e.Eventually(90*time.Second, what, func(ctx context.Context) (bool, error) {
		code, body, err := p.Explainz(ctx, "format=json&provisioningrequest="+e.Namespace+"/"+request)
		if err == nil {
			last = body
		}
		if err != nil || code != http.StatusOK {
			return false, nil // not yet recorded: ask again
		}
		got = explainedRequest{}
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			return false, fmt.Errorf("decoding %q: %w", body, err)
		}
		return ok(got), nil
	})
	return got
}

// hasOutcome: one of the request's pod groups has outcome.
func hasOutcome(r explainedRequest, outcome string) (explain.PodGroup, bool) {
	for _, g := range r.PodGroups {
		if g.Outcome == outcome {
			return g, true
		}
	}
	return explain.PodGroup{}, false
}

// TestExplainzCheckCapacity: /explainz, served on the metrics port with
// --explain-on-metrics-port, answers for check-capacity
// requests with the loop's own check: one that fits is told on which nodes
// its pods are booked, with the Provisioned=True condition set; one whose
// pod is larger than what the nodes have left is told, per node group,
// the NodeResourcesFit refusal with the nodes and the cpu numbers (the
// first request's booking counted), with the Provisioned=False condition
// set.
func TestExplainzCheckCapacity(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	pool := framework.UniqueName("cc")
	for i := 0; i < 2; i++ {
		e.CreateNode(framework.MakeNode(fmt.Sprintf("%s-%d", pool, i)).Label("pool", pool).Obj())
	}
	path := itest.OneGroupConfig(e.Env, framework.UniqueName("unused"), 1, "registrationDelay: 1s")
	sel := map[string]string{"pool": pool}
	e.Request("fits", provreq.ClassCheckCapacity, nil, false, itest.PodSet{Name: "main", Count: 2, CPU: "3", Selector: sel})
	e.Request("toobig", provreq.ClassCheckCapacity, nil, false, itest.PodSet{Name: "main", Count: 1, CPU: "6", Selector: sel})
	// Served on the metrics port, as an operator exposes it, and there
	// only (--explain-address=""): every /explainz below goes to --address.
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path, "--explain-on-metrics-port", "--explain-address=")...)
	p.ExplainAddress = p.Address
	e.Condition("fits", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsFound, 60*time.Second)
	e.Condition("toobig", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 60*time.Second)

	// Each check is recorded in the loop that makes it; the loops after it
	// only book (fits) or wait for the retry (toobig): ask until the
	// record of a checking loop is the last one.
	booked := explainRequest(e.Env, p, "fits", "fits explained as booked", func(r explainedRequest) bool {
		_, ok := hasOutcome(r, explain.OutcomeBooked)
		return ok
	})
	g, _ := hasOutcome(booked, explain.OutcomeBooked)
	wantWhy := fmt.Sprintf("booked on %[1]s-0 (1), %[1]s-1 (1)", pool)
	if len(g.NodeGroups) != 1 || !g.NodeGroups[0].Fits || g.NodeGroups[0].Pods != 2 || g.NodeGroups[0].Why != wantWhy {
		t.Errorf("booking verdicts %+v, want one that fits, 2 pods, %q", g.NodeGroups, wantWhy)
	}
	if !hasCondition(booked.Conditions, provreq.ConditionProvisioned, "True", provreq.ReasonCapacityIsFound) {
		t.Errorf("conditions %+v lack Provisioned=True CapacityIsFound", booked.Conditions)
	}

	refused := explainRequest(e.Env, p, "toobig", "toobig explained with its refusal", func(r explainedRequest) bool {
		_, ok := hasOutcome(r, explain.OutcomeNoFit)
		return ok
	})
	g, _ = hasOutcome(refused, explain.OutcomeNoFit)
	// 4 CPUs a node, 3 of each booked for "fits": 1 left.
	wantDetail := fmt.Sprintf("2 node(s): %[1]s-0, %[1]s-1; the pod requests 6 cpu, the most free on these nodes is 1", pool)
	if len(g.NodeGroups) != 1 || g.NodeGroups[0].Plugin != "NodeResourcesFit" || g.NodeGroups[0].Reason != "Insufficient cpu" ||
		g.NodeGroups[0].Detail != wantDetail {
		t.Errorf("refusals %+v, want NodeResourcesFit: Insufficient cpu with %q", g.NodeGroups, wantDetail)
	}
	if !hasCondition(refused.Conditions, provreq.ConditionProvisioned, "False", provreq.ReasonCapacityIsNotFound) {
		t.Errorf("conditions %+v lack Provisioned=False CapacityIsNotFound", refused.Conditions)
	}
	// The text a person reads.
	_, text, err := p.Explainz(e.Context(), "provisioningrequest="+e.Namespace+"/toobig")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Provisioned=False (CapacityIsNotFound)", "Outcome: " + explain.OutcomeNoFit,
		"NodeResourcesFit: Insufficient cpu; 2 node(s)"} {
		if !strings.Contains(text, want) {
			t.Logf("/explainz text lacks %q (it may be of a later loop):\n%s", want, text)
		}
	}
}

func hasCondition(conds []explain.Condition, typ, status, reason string) bool {
	for _, c := range conds {
		if c.Type == typ && c.Status == status && c.Reason == reason {
			return true
		}
	}
	return false
}
