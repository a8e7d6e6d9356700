package scaleup

import (
	"context"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/fake"
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/expander"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
)

// TestPriorityExpanderFollowsConfigMap builds the chain priority,least-waste
// on a real ConfigMap informer and a real event recorder: the choice follows
// updates of the ConfigMap, and a broken ConfigMap falls through to
// least-waste and gets a Warning event.
func TestPriorityExpanderFollowsConfigMap(t *testing.T) {
	e := framework.New(t)
	ctx := e.Context()
	configMaps := e.Client.CoreV1().ConfigMaps(e.Namespace)
	cm, err := configMaps.Create(ctx, &apiv1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: expander.PriorityConfigMapName},
		Data:       map[string]string{expander.PriorityConfigMapKey: "50:\n  - ^b-medium$\n10:\n  - .*\n"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	factory := informers.NewSharedInformerFactoryWithOptions(e.Client, 0, informers.WithNamespace(e.Namespace))
	lister := factory.Core().V1().ConfigMaps().Lister().ConfigMaps(e.Namespace)
	factory.Start(ctx.Done())
	t.Cleanup(factory.Shutdown)
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("informer for %v did not sync", typ)
		}
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: e.Client.CoreV1().Events("")})
	t.Cleanup(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(scheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler"})

	// Three pods of 1 cpu and 4Gi: least-waste prefers the 4-cpu group.
	provider := fake.NewProvider()
	var options []expander.Option
	nodeInfos := map[string]*cloudprovider.NodeInfo{}
	for _, g := range []struct{ id, cpu, memory string }{
		{"a-small", "4", "16Gi"}, {"b-medium", "8", "32Gi"}, {"c-large", "16", "64Gi"},
	} {
		node := framework.MakeNode(g.id).Resources(g.cpu, g.memory, "110").Obj()
		ng := provider.AddNodeGroup(g.id, 0, 10, 0, node)
		nodeInfos[g.id] = &cloudprovider.NodeInfo{Node: node}
		var pods []*apiv1.Pod
		for range 3 {
			pods = append(pods, framework.MakePod(e.Namespace, "p").Req("1", "4Gi").Obj())
		}
		options = append(options, expander.Option{NodeGroup: ng, NodeCount: 1, Pods: pods})
	}
	chain, err := expander.NewChain(ctx, []string{config.PriorityExpander, config.LeastWasteExpander}, expander.Deps{
		ConfigMaps: lister, Recorder: recorder, Namespace: e.Namespace,
		Random: func(n int) int { t.Errorf("random choice among %d options: the chain should settle it", n); return 0 },
	})
	if err != nil {
		t.Fatal(err)
	}
	chooses := func(want string) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			best := chain.BestOption(ctx, options, nodeInfos)
			return best != nil && best.NodeGroup.Id() == want, nil
		}
	}
	update := func(priorities string) {
		t.Helper()
		cm.Data[expander.PriorityConfigMapKey] = priorities
		if cm, err = configMaps.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	e.Eventually(5*time.Second, "priority picks b-medium", chooses("b-medium"))
	update("50:\n  - ^c-large$\n10:\n  - .*\n")
	e.Eventually(5*time.Second, "after the update, priority picks c-large", chooses("c-large"))
	update("50:\n  - [c-large\n")
	e.Eventually(5*time.Second, "with a broken ConfigMap, least-waste picks a-small", chooses("a-small"))

	selector := fields.Set{
		"involvedObject.kind": "ConfigMap", "involvedObject.name": cm.Name, "involvedObject.uid": string(cm.UID),
		"type": apiv1.EventTypeWarning, "reason": expander.ReasonPriorityConfigMapInvalid,
	}.AsSelector().String()
	e.Eventually(10*time.Second, "Warning event "+expander.ReasonPriorityConfigMapInvalid+" on the ConfigMap",
		func(ctx context.Context) (bool, error) {
			events, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{FieldSelector: selector})
			if err != nil {
				return false, err
			}
			return len(events.Items) > 0, nil
		})
}
