package itest

import (
	"context"
	"sync/atomic"
	"time"

	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// ReadyWebPods counts the Ready pods of app web in the test's namespace that
// are not being deleted.
func ReadyWebPods(ctx context.Context, e *framework.Env) (int, error) {
	list, err := e.Client.CoreV1().Pods(e.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range list.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == apiv1.PodReady && c.Status == apiv1.ConditionTrue && p.DeletionTimestamp == nil {
				n++
			}
		}
	}
	return n, nil
}

// WebPDBAndSampler creates a PodDisruptionBudget of minAvailable 1 over the
// pods of app web, waits until it allows one disruption, and samples the
// Ready web pods every 100 ms (a failed list, as while kube-apiserver is
// down, is no sample) until stop is called (at the latest when the test
// ends); minReady gives the fewest seen (want at least 1).
func WebPDBAndSampler(e *framework.Env) (minReady func() int32, stop func()) {
	e.T.Helper()
	one := intstr.FromInt32(1)
	pdb := &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.Namespace},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}}
	if _, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Create(e.Context(), pdb, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(30*time.Second, "the PDB allowing one disruption", func(ctx context.Context) (bool, error) {
		got, err := e.Client.PolicyV1().PodDisruptionBudgets(e.Namespace).Get(ctx, "web", metav1.GetOptions{})
		return err == nil && got.Status.DisruptionsAllowed == 1, err
	})
	var low atomic.Int32
	low.Store(2)
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if n, err := ReadyWebPods(ctx, e); err == nil && int32(n) < low.Load() {
				low.Store(int32(n))
			}
			cancel()
		}
	}()
	var once atomic.Bool
	stop = func() {
		if once.CompareAndSwap(false, true) {
			close(done)
			<-sampled
		}
	}
	e.T.Cleanup(stop)
	return low.Load, stop
}
