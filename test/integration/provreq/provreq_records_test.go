package provreq

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider/kwok"
	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestRestoredRecordsThatCannotBeTrustedDeleteNothing: a second autoscaler
// start (a new leader) finds records of all-or-nothing attempts it must not
// act on as written, in groups that hold instances an operator added:
//   - a rollback of a request that no longer exists;
//   - an attempt keyed by a UID whose request was recreated (same name,
//     another UID);
//   - an attempt started an hour ago, far past --max-node-provision-time;
//   - an attempt past its deadline but within the margin, which claims one
//     instance whose node runs an ordinary pod, in a group that lists
//     another instance it never claimed.
//
// Nothing is deleted: the first three are dropped with Warning events on
// the records' ConfigMap (OrphanedAttemptRecord twice, StaleAttemptRecord),
// the last one's rollback keeps the busy node (RollbackKeptBusyNode) and
// never touches the instance it did not claim. The autoscaler before this
// change deleted four of the five operator nodes.
func TestRestoredRecordsThatCannotBeTrustedDeleteNothing(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	g1, g2, g3 := framework.UniqueName("rec1"), framework.UniqueName("rec2"), framework.UniqueName("rec3")
	var cfg strings.Builder
	cfg.WriteString("nodeGroups:\n")
	for _, g := range []string{g1, g2, g3} {
		fmt.Fprintf(&cfg, `- name: %[1]s
  maxSize: 6
  template:
    labels: {%[2]s: %[3]s, pool: %[1]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
`, g, framework.TestNamespaceLabel, e.Namespace)
	}
	path := itest.WriteKwokConfig(e.Env, cfg.String())
	// The operator's instances: Nodes the kwok provider takes as members.
	opA, opB, opC, opE, opF := framework.UniqueName("op-a"), framework.UniqueName("op-b"), framework.UniqueName("op-c"),
		framework.UniqueName("op-e"), framework.UniqueName("op-f")
	for node, group := range map[string]string{opA: g1, opB: g1, opC: g2, opE: g3, opF: g3} {
		itest.GroupNode(e.Env, group, node, nil)
	}
	web := framework.MakePod(e.Namespace, "web").Req("1", "100Mi").Obj()
	web.Spec.NodeName = opE
	if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), web, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The requests' pods fit no group: nothing is ever scaled up for them.
	nowhere := itest.PodSet{Name: "main", Count: 1, CPU: "1", Selector: map[string]string{"pool": "nowhere"}}
	for _, name := range []string{"live", "old", "fresh"} {
		e.Request(name, provreq.ClassBestEffortAtomicScaleUp, nil, false, nowhere)
	}
	uid := map[string]string{}
	for _, name := range []string{"live", "old", "fresh"} {
		pr, err := e.PRs.Get(e.Context(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uid[name] = string(pr.UID)
	}
	args := itest.ProvreqArgs(e, path, "--max-node-provision-time=60s", "--scale-down-enabled=false")

	// The first autoscaler runs a few loops and stops, leaving no record.
	first := itest.StartAutoscaler(t, "first", args...)
	e.Eventually(60*time.Second, "the first autoscaler loops", func(context.Context) (bool, error) {
		return strings.Count(first.Log.String(), "Loop summary") >= 2, nil
	})
	first.Terminate(30 * time.Second)

	// What a leader before it could have left, written while none runs.
	now := time.Now().UTC()
	ts := func(d time.Duration) string { return now.Add(-d).Format(time.RFC3339) }
	id := func(node string) string { return kwok.ProviderIDPrefix + node }
	gone, recreated := framework.UniqueName("uid-gone"), framework.UniqueName("uid-live-before")
	records := map[string]string{
		gone: fmt.Sprintf(`{"version":1,"request":"%s/gone","rollbacks":[{"why":"the request failed","since":%q,`+
			`"groups":{%q:{"asked":1,"claimed":[%q]}}}]}`, e.Namespace, ts(10*time.Second), g1, id(opA)),
		recreated: fmt.Sprintf(`{"version":1,"request":"%s/live","attempt":{"started":%q,`+
			`"groups":{%q:{"asked":2,"claimed":[%q]}}}}`, e.Namespace, ts(10*time.Second), g1, id(opB)),
		uid["old"]: fmt.Sprintf(`{"version":1,"request":"%s/old","attempt":{"started":%q,`+
			`"groups":{%q:{"asked":2,"claimed":[%q]}}}}`, e.Namespace, ts(time.Hour), g2, id(opC)),
		uid["fresh"]: fmt.Sprintf(`{"version":1,"request":"%s/fresh","attempt":{"started":%q,`+
			`"groups":{%q:{"asked":3,"claimed":[%q]}}}}`, e.Namespace, ts(70*time.Second), g3, id(opE)),
	}
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: processor.RecordsConfigMap, Namespace: e.Namespace}, Data: records}
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	deletions := itest.WatchNodeDeletions(e.Env)
	second := itest.StartAutoscaler(t, "second", args...)
	e.Eventually(60*time.Second, "the second autoscaler restores the records", func(context.Context) (bool, error) {
		return second.Log.Contains("Restored the records of all-or-nothing attempts"), nil
	})
	// Three more loops: the restored attempts and rollbacks are acted on
	// in the first.
	loops := strings.Count(second.Log.String(), "Loop summary")
	e.Eventually(60*time.Second, "three more loops", func(context.Context) (bool, error) {
		return strings.Count(second.Log.String(), "Loop summary") >= loops+3, nil
	})
	if d := deletions.All(); len(d) > 0 {
		t.Errorf("nodes deleted: %v", d)
	}
	if got, want := itest.NodesPerPool(e.Env), map[string]int{g1: 2, g2: 1, g3: 2}; !maps.Equal(got, want) {
		t.Errorf("nodes per pool %v, want %v", got, want)
	}

	// The warnings on the records' ConfigMap, and what is left on record.
	want := []string{processor.ReasonOrphanedRecord + ": no longer exists", processor.ReasonOrphanedRecord + ": recreated",
		processor.ReasonStaleRecord + ": ", processor.ReasonRollbackKeptNode + ": " + e.Namespace + "/web"}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		events, _ := e.Client.CoreV1().Events(e.Namespace).List(context.Background(), metav1.ListOptions{})
		for _, ev := range events.Items {
			t.Logf("event %s %s/%s %s: %s", ev.Type, ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	})
	e.Eventually(30*time.Second, "the Warning events on the records", func(ctx context.Context) (bool, error) {
		events, err := e.Client.CoreV1().Events(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, w := range want {
			reason, text, _ := strings.Cut(w, ": ")
			if !slices.ContainsFunc(events.Items, func(ev apiv1.Event) bool {
				return ev.Type == apiv1.EventTypeWarning && ev.Reason == reason && ev.InvolvedObject.Kind == "ConfigMap" &&
					ev.InvolvedObject.Name == processor.RecordsConfigMap && strings.Contains(ev.Message, text)
			}) {
				return false, nil
			}
		}
		return true, nil
	})
	e.Eventually(30*time.Second, "only fresh's rollback on record", func(ctx context.Context) (bool, error) {
		cm, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Get(ctx, processor.RecordsConfigMap, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		_, ok := cm.Data[uid["fresh"]]
		return len(cm.Data) == 1 && ok && strings.Contains(cm.Data[uid["fresh"]], `"kept"`), nil
	})
}
