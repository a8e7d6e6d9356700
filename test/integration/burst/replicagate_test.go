package burst

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// replicaGate is a validating admission webhook on the loopback that holds
// each creation of a workload's pods (label app=<app> in the test's
// namespace) until the test releases it. The ReplicaSet controller then
// creates the replicas in the steps the test sets, as a large burst
// arrives over minutes, and none of its creations fails (no
// ReplicaFailure). A creation held past the webhook's 30s timeout is
// refused by the API server (failurePolicy Fail), and logged here.
type replicaGate struct {
	e        *framework.Env
	mu       sync.Mutex
	released int
	admitted int
	open     bool // everything passes (the test is ending)
	probed   atomic.Bool
}

// newReplicaGate starts the webhook, registers it, and returns once the API
// server calls it. It is unregistered and opened when the test ends.
func newReplicaGate(e *framework.Env, app string) *replicaGate {
	e.T.Helper()
	g := &replicaGate{e: e}
	srv := httptest.NewTLSServer(g) // listens on 127.0.0.1
	caBundle := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	url := srv.URL + "/gate"
	fail, none, timeout := admissionregv1.Fail, admissionregv1.SideEffectClassNone, int32(30)
	scope := admissionregv1.NamespacedScope
	cfg := &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: framework.UniqueName("replica-gate")},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:         "gate.test.autoscaler.local",
			ClientConfig: admissionregv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create},
				Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
					Resources: []string{"pods"}, Scope: &scope}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": e.Namespace}},
			ObjectSelector:          &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := e.Client.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := hooks.Create(e.Context(), cfg, metav1.CreateOptions{}); err != nil {
		srv.Close()
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := hooks.Delete(ctx, cfg.Name, metav1.DeleteOptions{}); err != nil {
			e.T.Logf("deleting the webhook %s: %v", cfg.Name, err)
		}
		g.mu.Lock()
		g.open = true
		g.mu.Unlock()
		srv.Close()
	})
	// The API server picks the configuration up asynchronously: a dry-run
	// creation reaches the webhook once it is in force.
	probe := framework.MakePod(e.Namespace, "gate-probe").Obj()
	probe.Labels = map[string]string{"app": app}
	e.Eventually(60*time.Second, "the gate webhook in force", func(ctx context.Context) (bool, error) {
		_, err := e.Client.CoreV1().Pods(e.Namespace).Create(ctx, probe.DeepCopy(),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil && g.probed.Load(), nil
	})
	return g
}

// release lets n more pod creations through.
func (g *replicaGate) release(n int) {
	g.mu.Lock()
	g.released += n
	g.mu.Unlock()
}

// pass takes one released creation, if there is one.
func (g *replicaGate) pass() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open || g.admitted < g.released {
		g.admitted++
		return true
	}
	return false
}

// ServeHTTP answers an AdmissionReview: dry runs at once, other creations
// when released.
func (g *replicaGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	if req.DryRun != nil && *req.DryRun {
		g.probed.Store(true)
	} else {
		for !g.pass() {
			select {
			case <-r.Context().Done():
				g.e.T.Logf("a held pod creation outlived the webhook's timeout (%s): it is refused", req.Name)
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	review.Request = nil
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(review)
}

// activePodsOf counts the pods of app in the test's namespace that are not
// terminating or terminal.
func activePodsOf(ctx context.Context, e *framework.Env, app string) (int, error) {
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != apiv1.PodFailed && p.Status.Phase != apiv1.PodSucceeded {
			n++
		}
	}
	return n, nil
}
