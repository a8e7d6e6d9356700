package scaleup

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"

	fakeprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
)

// --force-ds: a group whose template comes from a real node gets every
// missing DaemonSet pod on it; when they do not fit, the group is too small
// and gets no scale-up. Without the flag only the missing pods that fit are
// counted, and the group grows for a pod that fits beside them.
func TestForceDaemonSets(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	yes := true
	cpuPod := func(name, node, cpu string, owner metav1.OwnerReference) *apiv1.Pod {
		p := pendingPods(1, cpu)[0]
		p.Name, p.UID, p.Spec.NodeName = name, k8stypes.UID("uid-"+name), node
		p.OwnerReferences = []metav1.OwnerReference{owner}
		p.Status.Phase = apiv1.PodRunning
		return p
	}
	for _, force := range []bool{false, true} {
		provider := fakeprovider.NewProvider()
		provider.AddNodeGroup("g", 0, 10, 1, nil) // no provider template: made from its node
		real := templateNode("real", "4")
		real.CreationTimestamp = metav1.NewTime(now.Add(-time.Hour))
		provider.AddNode("g", real)
		logs := cpuPod("logs-real", "real", "2", metav1.OwnerReference{Kind: "DaemonSet", Name: "logs", UID: "uid-logs", Controller: &yes})
		web := cpuPod("web-real", "real", "2", metav1.OwnerReference{Kind: "ReplicaSet", Name: "web", UID: "web", Controller: &yes})
		indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
		for _, ds := range []struct{ name, cpu string }{{"logs", "2"}, {"metrics", "3"}} {
			_ = indexer.Add(&appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: ds.name, UID: k8stypes.UID("uid-" + ds.name)},
				Spec: appsv1.DaemonSetSpec{Template: apiv1.PodTemplateSpec{Spec: apiv1.PodSpec{Containers: []apiv1.Container{{Name: "c",
					Resources: apiv1.ResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse(ds.cpu)}}}}}}}})
		}
		o := newOrchestrator(t, provider, func(o *Options) { o.ForceDaemonSets = force })
		o.daemonSets = appslisters.NewDaemonSetLister(indexer)
		res, err := runLoop(context.Background(), o, Input{Now: now, Nodes: []*apiv1.Node{real},
			ScheduledPods: []*apiv1.Pod{logs, web}, Pending: pendingPods(1, "1")})
		if err != nil {
			t.Fatal(err)
		}
		got := increases(res)["g"]
		if !force && got != 1 {
			t.Errorf("without --force-ds: g +%d, want +1 (remaining %v)", got, res.Remaining)
		}
		if force && got != 0 {
			t.Errorf("with --force-ds: g +%d, want none: its DaemonSets fill the node", got)
		}
	}
}
