package drain

import (
	"errors"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	apiv1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	appslisters "k8s.io/client-go/listers/apps/v1"
	batchlisters "k8s.io/client-go/listers/batch/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	policylisters "k8s.io/client-go/listers/policy/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
)

// t0 is the "now" of every test; pods are created an hour before unless told.
var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// makePod is a running pod on n1 in "default", created an hour before t0.
func makePod(name string) *testbuild.PodBuilder {
	return testbuild.Pod(name).Created(t0.Add(-time.Hour)).On("n1").Phase(apiv1.PodRunning)
}

func objMeta(ns, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: ns, Name: name, UID: testbuild.UID(name)}
}

func replicaSet(ns, name string, replicas int32) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: objMeta(ns, name), Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(replicas)}}
}

func replicationController(ns, name string, replicas int32) *apiv1.ReplicationController {
	return &apiv1.ReplicationController{ObjectMeta: objMeta(ns, name),
		Spec: apiv1.ReplicationControllerSpec{Replicas: ptr.To(replicas)}}
}

func statefulSet(ns, name string) *appsv1.StatefulSet {
	return &appsv1.StatefulSet{ObjectMeta: objMeta(ns, name)}
}

func job(ns, name string) *batchv1.Job { return &batchv1.Job{ObjectMeta: objMeta(ns, name)} }

// pdb selects pods labelled app=<app> (every pod of ns when app is "").
func pdb(ns, name, app string, allowed int32) *policyv1.PodDisruptionBudget {
	sel := &metav1.LabelSelector{}
	if app != "" {
		sel.MatchLabels = map[string]string{"app": app}
	}
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: objMeta(ns, name),
		Spec:       policyv1.PodDisruptionBudgetSpec{Selector: sel, MaxUnavailable: ptr.To(intstr.FromInt32(1))},
		Status:     policyv1.PodDisruptionBudgetStatus{DisruptionsAllowed: allowed},
	}
}

func newIndexer(t *testing.T, objs []runtime.Object) cache.Indexer {
	t.Helper()
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := idx.Add(o); err != nil {
			t.Fatalf("adding %T to indexer: %v", o, err)
		}
	}
	return idx
}

// makeListers builds every lister from indexers holding objs, sorted by type.
func makeListers(t *testing.T, objs ...runtime.Object) Listers {
	t.Helper()
	byType := map[string][]runtime.Object{}
	for _, o := range objs {
		var k string
		switch o.(type) {
		case *apiv1.ReplicationController:
			k = "rc"
		case *appsv1.ReplicaSet:
			k = "rs"
		case *appsv1.StatefulSet:
			k = "ss"
		case *appsv1.DaemonSet:
			k = "ds"
		case *batchv1.Job:
			k = "job"
		case *policyv1.PodDisruptionBudget:
			k = "pdb"
		default:
			t.Fatalf("makeListers: unsupported %T", o)
		}
		byType[k] = append(byType[k], o)
	}
	return Listers{
		ReplicationControllers: corelisters.NewReplicationControllerLister(newIndexer(t, byType["rc"])),
		ReplicaSets:            appslisters.NewReplicaSetLister(newIndexer(t, byType["rs"])),
		StatefulSets:           appslisters.NewStatefulSetLister(newIndexer(t, byType["ss"])),
		DaemonSets:             appslisters.NewDaemonSetLister(newIndexer(t, byType["ds"])),
		Jobs:                   batchlisters.NewJobLister(newIndexer(t, byType["job"])),
		PodDisruptionBudgets:   policylisters.NewPodDisruptionBudgetLister(newIndexer(t, byType["pdb"])),
	}
}

var errBroken = errors.New("cache broken")

// brokenRSLister fails every Get with an error other than "not found".
type brokenRSLister struct{ appslisters.ReplicaSetLister }

func (brokenRSLister) ReplicaSets(string) appslisters.ReplicaSetNamespaceLister {
	return brokenRSNamespaceLister{}
}

type brokenRSNamespaceLister struct {
	appslisters.ReplicaSetNamespaceLister
}

func (brokenRSNamespaceLister) Get(string) (*appsv1.ReplicaSet, error) { return nil, errBroken }

// brokenPDBLister fails every List.
type brokenPDBLister struct {
	policylisters.PodDisruptionBudgetLister
}

func (brokenPDBLister) List(labels.Selector) ([]*policyv1.PodDisruptionBudget, error) {
	return nil, errBroken
}

func (brokenPDBLister) PodDisruptionBudgets(string) policylisters.PodDisruptionBudgetNamespaceLister {
	return brokenPDBNamespaceLister{}
}

type brokenPDBNamespaceLister struct {
	policylisters.PodDisruptionBudgetNamespaceLister
}

func (brokenPDBNamespaceLister) List(labels.Selector) ([]*policyv1.PodDisruptionBudget, error) {
	return nil, errBroken
}

// defaultOptions are upstream's flag defaults.
func defaultOptions() Options {
	return Options{
		SkipNodesWithSystemPods:            true,
		SkipNodesWithLocalStorage:          true,
		SkipNodesWithCustomControllerPods:  true,
		BlockingSystemPodDisruptionTimeout: time.Hour,
		MaxGracefulTerminationSec:          600,
	}
}

// verdictName makes outcomes readable in failures.
func (v verdict) String() string {
	return [...]string{"undecided", "leave", "move", "block"}[v]
}

// checkOutcome compares verdict and reason, the parts a rule promises.
func checkOutcome(t *testing.T, got outcome, wantVerdict verdict, wantReason BlockingReason) {
	t.Helper()
	if got.verdict != wantVerdict || got.reason != wantReason {
		t.Errorf("got %v %q (%s), want %v %q", got.verdict, got.reason, got.detail, wantVerdict, wantReason)
	}
	if got.verdict == block && got.detail == "" {
		t.Errorf("blocking outcome %q without detail", got.reason)
	}
}
