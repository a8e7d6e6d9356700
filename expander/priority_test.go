package expander

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

const testNamespace = "autoscaler"

// configMaps is a ConfigMap lister over an indexer the test fills.
func configMaps(t *testing.T, objs ...*apiv1.ConfigMap) (cache.Indexer, corelisters.ConfigMapNamespaceLister) {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		if err := indexer.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	return indexer, corelisters.NewConfigMapLister(indexer).ConfigMaps(testNamespace)
}

// priorityConfigMap is the expander's ConfigMap in namespace with data.
func priorityConfigMap(namespace string, data map[string]string) *apiv1.ConfigMap {
	return &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: PriorityConfigMapName}, Data: data}
}

func withPriorities(yaml string) *apiv1.ConfigMap {
	return priorityConfigMap(testNamespace, map[string]string{PriorityConfigMapKey: yaml})
}

// reasons drains the recorder, returning "Type Reason" of each event.
func reasons(r *record.FakeRecorder) []string {
	out := []string{}
	for {
		select {
		case e := <-r.Events:
			f := strings.Fields(e)
			out = append(out, f[0]+" "+f[1])
		default:
			return out
		}
	}
}

func TestPriority(t *testing.T) {
	const (
		invalid      = "Warning " + ReasonPriorityConfigMapInvalid
		notMatched   = "Warning " + ReasonPriorityConfigMapNotMatchedGroup
		noneMatched  = "Warning " + ReasonPriorityConfigMapNoGroupMatched
		everyOptions = "std-a/1 std-b/2 gpu-a/1 m5-large-pool/3"
	)
	tests := []struct {
		name       string
		configMap  *apiv1.ConfigMap
		want       string
		wantEvents []string
	}{
		{name: "no ConfigMap keeps every option", want: everyOptions},
		{name: "a ConfigMap in another namespace is not read",
			configMap: priorityConfigMap("elsewhere", map[string]string{PriorityConfigMapKey: "10: [std-a]"}), want: everyOptions},
		{name: "missing key", configMap: priorityConfigMap(testNamespace, map[string]string{"other": "10: [std-a]"}),
			want: everyOptions, wantEvents: []string{invalid}},
		{name: "bad YAML", configMap: withPriorities("10: [std-a\n"), want: everyOptions, wantEvents: []string{invalid}},
		{name: "a priority that is not an integer", configMap: withPriorities("high:\n  - std-a\n"),
			want: everyOptions, wantEvents: []string{invalid}},
		{name: "expressions that are not a list", configMap: withPriorities("10: std-a\n"),
			want: everyOptions, wantEvents: []string{invalid}},
		{name: "bad regular expression", configMap: withPriorities("10:\n  - std-(a\n"),
			want: everyOptions, wantEvents: []string{invalid}},
		{name: "no priority at all", configMap: withPriorities(""), want: everyOptions, wantEvents: []string{invalid}},
		{name: "the highest priority wins", configMap: withPriorities("10:\n  - std-a\n50:\n  - gpu-a\n20:\n  - .*\n"),
			want: "gpu-a/1"},
		{name: "ties at the top priority are kept in order", configMap: withPriorities("50:\n  - ^std-\n1:\n  - .*\n"),
			want: "std-a/1 std-b/2"},
		{name: "expressions match anywhere in the Id", configMap: withPriorities("50:\n  - large\n1:\n  - .*\n"),
			want: "m5-large-pool/3"},
		{name: "anchored expressions match whole Ids", configMap: withPriorities("50:\n  - ^large$\n  - ^std-b$\n1:\n  - .*\n"),
			want: "std-b/2"},
		{name: "a group matching several priorities counts its highest",
			configMap: withPriorities("30:\n  - std\n  - gpu\n40:\n  - b$\n"), want: "std-b/2",
			wantEvents: []string{notMatched}},
		{name: "groups matching nothing are dropped", configMap: withPriorities("5:\n  - std-b\n"),
			want: "std-b/2", wantEvents: []string{notMatched, notMatched, notMatched}},
		{name: "when nothing matches every option is kept", configMap: withPriorities("5:\n  - nothing\n"),
			want: everyOptions, wantEvents: []string{notMatched, notMatched, notMatched, notMatched, noneMatched}},
		{name: "of duplicate priority keys the last list counts",
			configMap: withPriorities("50:\n  - std-a\n50:\n  - std-b\n1:\n  - .*\n"), want: "std-b/2"},
		{name: "negative priorities are lower", configMap: withPriorities("-5:\n  - std-a\n-10:\n  - .*\n"),
			want: "std-a/1"},
	}
	w := newWorld().group("std-a", nil).group("std-b", nil).group("gpu-a", nil).group("m5-large-pool", nil)
	options := w.options(t, []optionSpec{{group: "std-a", nodes: 1}, {group: "std-b", nodes: 2},
		{group: "gpu-a", nodes: 1}, {group: "m5-large-pool", nodes: 3}})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*apiv1.ConfigMap
			if tc.configMap != nil {
				objs = append(objs, tc.configMap)
			}
			_, lister := configMaps(t, objs...)
			recorder := record.NewFakeRecorder(100)
			p, err := newPriority(lister, recorder, testNamespace)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(ids(p.BestOptions(t.Context(), options, nil)), " ")
			if got != tc.want {
				t.Errorf("BestOptions = %s, want %s", got, tc.want)
			}
			if diff := cmp.Diff(append([]string{}, tc.wantEvents...), reasons(recorder)); diff != "" {
				t.Errorf("events (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPriorityFollowsConfigMapChanges checks that every call reads the
// ConfigMap anew: edits, breakage, repair and deletion all take effect.
func TestPriorityFollowsConfigMapChanges(t *testing.T) {
	w := newWorld().group("a", nil).group("b", nil)
	options := w.options(t, []optionSpec{{group: "a", nodes: 1}, {group: "b", nodes: 1}})
	indexer, lister := configMaps(t)
	recorder := record.NewFakeRecorder(100)
	p, err := newPriority(lister, recorder, testNamespace)
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		name      string
		configMap *apiv1.ConfigMap // nil deletes it
		want      string
		events    []string
	}{
		{name: "prefer a", configMap: withPriorities("20: [^a$]\n10: [^b$]\n"), want: "a/1"},
		{name: "prefer b", configMap: withPriorities("10: [^a$]\n20: [^b$]\n"), want: "b/1"},
		{name: "broken", configMap: withPriorities("20: [^a$\n"), want: "a/1 b/1",
			events: []string{"Warning " + ReasonPriorityConfigMapInvalid}},
		{name: "repaired as before", configMap: withPriorities("10: [^a$]\n20: [^b$]\n"), want: "b/1"},
		{name: "deleted", want: "a/1 b/1"},
		{name: "recreated", configMap: withPriorities("20: [^a$]\n"), want: "a/1",
			events: []string{"Warning " + ReasonPriorityConfigMapNotMatchedGroup}},
	}
	for _, s := range steps {
		if s.configMap != nil {
			if err := indexer.Update(s.configMap); err != nil {
				t.Fatal(err)
			}
		} else if err := indexer.Delete(priorityConfigMap(testNamespace, nil)); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(ids(p.BestOptions(t.Context(), options, nil)), " "); got != s.want {
			t.Errorf("%s: BestOptions = %s, want %s", s.name, got, s.want)
		}
		if diff := cmp.Diff(append([]string{}, s.events...), reasons(recorder)); diff != "" {
			t.Errorf("%s: events (-want +got):\n%s", s.name, diff)
		}
	}
}

func TestPriorityWithoutRecorder(t *testing.T) {
	w := newWorld().group("a", nil).group("b", nil)
	options := w.options(t, []optionSpec{{group: "a", nodes: 1}, {group: "b", nodes: 1}})
	_, lister := configMaps(t, withPriorities("not: [a, map"))
	p, err := newPriority(lister, nil, testNamespace)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(ids(p.BestOptions(t.Context(), options, nil)), " "); got != "a/1 b/1" {
		t.Errorf("BestOptions = %s, want every option", got)
	}
}
