package itest

import (
	"context"
	"fmt"
	"sync"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// SecondCopyWatch watches the namespace's pods for a new pod named name (a
// UID other than first's) and checks, the moment it appears, that the
// machine the first copy ran on is gone (stands says whether it is; by
// default, whether its Node exists): a second copy while that machine may
// still run the first would be two copies of one StatefulSet pod at once.
type SecondCopyWatch struct {
	mu        sync.Mutex
	second    *apiv1.Pod
	violation string
}

func WatchSecondCopy(e *framework.Env, first *apiv1.Pod) *SecondCopyWatch {
	return WatchSecondCopyWhile(e, first, func(ctx context.Context) string {
		_, err := e.Client.CoreV1().Nodes().Get(ctx, first.Spec.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return ""
		}
		return fmt.Sprintf("node %s, which may still run the first, exists (get: %v)", first.Spec.NodeName, err)
	})
}

// WatchSecondCopyWhile is WatchSecondCopy with stands telling whether the
// first copy's machine may still stand ("" when it is gone for sure).
func WatchSecondCopyWhile(e *framework.Env, first *apiv1.Pod, stands func(ctx context.Context) string) *SecondCopyWatch {
	w := &SecondCopyWatch{}
	ctx, cancel := context.WithCancel(context.Background())
	e.T.Cleanup(cancel)
	wi, err := e.Client.CoreV1().Pods(e.Namespace).Watch(ctx, metav1.ListOptions{
		FieldSelector: "metadata.name=" + first.Name, ResourceVersion: first.ResourceVersion})
	if err != nil {
		e.T.Fatal(err)
	}
	go func() {
		defer wi.Stop()
		for ev := range wi.ResultChan() {
			p, ok := ev.Object.(*apiv1.Pod)
			if !ok || ev.Type == watch.Deleted || p.UID == first.UID {
				continue
			}
			standing := stands(ctx)
			w.mu.Lock()
			if w.second == nil {
				w.second = p.DeepCopy()
				if standing != "" {
					w.violation = fmt.Sprintf("a second %s (%s) was created while %s", p.Name, p.UID, standing)
				}
			}
			w.mu.Unlock()
			return
		}
	}()
	return w
}

// RunningPod waits for the namespace's pod name to run on a node.
func RunningPod(e *framework.Env, name string) *apiv1.Pod {
	e.T.Helper()
	var first *apiv1.Pod
	e.Eventually(120*time.Second, name+" Running", func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		first = p
		return p.Status.Phase == apiv1.PodRunning && p.Spec.NodeName != "", nil
	})
	return first
}

// HealedOnce waits for the second copy of first to run on another node,
// fails on a second copy the watch saw too early, and waits for the heal
// of first's node to end with HealSucceeded.
func HealedOnce(e *framework.Env, first *apiv1.Pod, copies *SecondCopyWatch) {
	e.T.Helper()
	old := first.Spec.NodeName
	e.Eventually(240*time.Second, first.Name+" Running again on another node", func(ctx context.Context) (bool, error) {
		p, err := e.Client.CoreV1().Pods(e.Namespace).Get(ctx, first.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		return p.UID != first.UID && p.Status.Phase == apiv1.PodRunning && p.Spec.NodeName != old, nil
	})
	// The watch's goroutine may still be checking the old machine when a
	// Get already sees the second copy running: wait for its verdict.
	var violation string
	e.Eventually(30*time.Second, "the watch saw the second "+first.Name, func(context.Context) (bool, error) {
		copies.mu.Lock()
		defer copies.mu.Unlock()
		violation = copies.violation
		return copies.second != nil, nil
	})
	if violation != "" {
		e.T.Fatal(violation)
	}
	e.Eventually(60*time.Second, "HealSucceeded on "+old, func(ctx context.Context) (bool, error) {
		ev, err := NodeEvents(ctx, e, old)
		return err == nil && ev["HealSucceeded"] != "", err
	})
}
