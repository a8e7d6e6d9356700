package client_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	v1 "k8s.io/autoscaler/cluster-autoscaler/provreq/apis/autoscaling.x-k8s.io/v1"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/client"
	framework "k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

func TestInformerAndListerFollowChanges(t *testing.T) {
	env, c := setup(t)
	other := framework.New(t) // a second namespace
	ctx, cancel := context.WithCancel(env.Context())
	defer cancel()

	informer := client.NewInformer(c, "", 0)
	var mu sync.Mutex
	events := map[string][]string{} // namespace/name -> add, update, delete
	record := func(kind string, obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		pr := obj.(*v1.ProvisioningRequest)
		mu.Lock()
		defer mu.Unlock()
		events[pr.Namespace+"/"+pr.Name] = append(events[pr.Namespace+"/"+pr.Name], kind)
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { record("add", obj) },
		UpdateFunc: func(_, obj any) { record("update", obj) },
		DeleteFunc: func(obj any) { record("delete", obj) },
	}); err != nil {
		t.Fatal(err)
	}
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	lister := client.NewLister(informer.GetIndexer())

	mine, err := c.ProvisioningRequests(env.Namespace).Create(ctx, validRequest(env.Namespace, "watched"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ProvisioningRequests(other.Namespace).Create(ctx, validRequest(other.Namespace, "watched"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(10*time.Second, "lister sees both creations", func(context.Context) (bool, error) {
		_, err1 := lister.Get(env.Namespace, "watched")
		_, err2 := lister.ProvisioningRequests(other.Namespace).Get("watched")
		return err1 == nil && err2 == nil, nil
	})
	inNS, err := lister.ProvisioningRequests(env.Namespace).List(labels.Everything())
	if err != nil || len(inNS) != 1 || inNS[0].UID != mine.UID {
		t.Errorf("namespace list = %v, %v; want only %s", inNS, err, mine.Name)
	}
	byIndex, err := informer.GetIndexer().ByIndex(cache.NamespaceIndex, other.Namespace)
	if err != nil || len(byIndex) != 1 {
		t.Errorf("namespace index of %s: %d objects, %v", other.Namespace, len(byIndex), err)
	}
	all, err := lister.List(labels.Everything())
	if err != nil {
		t.Fatal(err)
	}
	var ours int
	for _, pr := range all {
		if pr.Namespace == env.Namespace || pr.Namespace == other.Namespace {
			ours++
		}
	}
	if ours != 2 {
		t.Errorf("all-namespace list has %d of the test's requests, want 2", ours)
	}

	// Update: a label, then a status write.
	upd := mine.DeepCopy()
	upd.Labels = map[string]string{"phase": "two"}
	if _, err := c.ProvisioningRequests(env.Namespace).Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st := v1.ProvisioningRequestStatus{}
	provreq.SetCondition(&st.Conditions, metav1.Condition{Type: provreq.ConditionAccepted, Status: metav1.ConditionTrue, Reason: provreq.ReasonAccepted}, time.Now())
	if _, err := c.ProvisioningRequests(env.Namespace).ApplyStatus(ctx, mine.Name, st, metav1.ApplyOptions{FieldManager: "informer-test"}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(10*time.Second, "lister sees the label and the condition", func(context.Context) (bool, error) {
		pr, err := lister.Get(env.Namespace, "watched")
		return err == nil && pr.Labels["phase"] == "two" && provreq.IsConditionTrue(pr.Status.Conditions, provreq.ConditionAccepted), nil
	})
	sel, _ := labels.Parse("phase=two")
	if got, err := lister.ProvisioningRequests(env.Namespace).List(sel); err != nil || len(got) != 1 {
		t.Errorf("list by label = %v, %v", got, err)
	}

	// Delete.
	if err := c.ProvisioningRequests(env.Namespace).Delete(ctx, mine.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.Eventually(10*time.Second, "lister forgets the deleted request", func(context.Context) (bool, error) {
		_, err := lister.Get(env.Namespace, "watched")
		return apierrors.IsNotFound(err), nil
	})
	if _, err := lister.Get(other.Namespace, "watched"); err != nil {
		t.Errorf("the other namespace's request: %v", err)
	}
	// The cache changes before the handlers hear of it: wait for them.
	want := []string{"add", "update", "update", "delete"}
	var got []string
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		mu.Lock()
		got = append([]string(nil), events[env.Namespace+"/watched"]...)
		mu.Unlock()
		return len(got) >= len(want), nil
	})
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s (%v)", diff, err)
	}
}
