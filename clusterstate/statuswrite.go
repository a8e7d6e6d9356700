package clusterstate

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// DefaultStatusRefresh is StatusWriter.RefreshAfter's default: the status
// is rewritten for its times alone at least this often (upstream's default
// scan interval, at which upstream's status is this old at most).
const DefaultStatusRefresh = 10 * time.Second

func (w *StatusWriter) refreshAfter() time.Duration {
	if w.RefreshAfter == 0 {
		return DefaultStatusRefresh
	}
	return w.RefreshAfter
}

// lastWrite is what the StatusWriter remembers of its last write.
type lastWrite struct {
	// cm is the server's answer to the last successful write: the next
	// write updates it in place, without reading the ConfigMap first (a
	// conflict or its deletion makes that write read it again).
	cm *apiv1.ConfigMap
	// ok: the last write succeeded, with a status time; at, status,
	// unremovable and sections describe it (status without its times).
	ok          bool
	at          time.Time
	status      Status
	unremovable []UnremovableNode
	sections    map[string]string
	// called is the status time of the last call to Write, written or not.
	called time.Time
	// encoded is the YAML of the unremovable list encodedFor.
	encodedFor []UnremovableNode
	encoded    []byte
	// statuses encodes the statuses.
	statuses statusEncoder
}

// statusTime parses st.Time; false when it does not parse.
func statusTime(st *Status) (time.Time, bool) {
	t, err := time.Parse(StatusTimeLayout, st.Time)
	return t, err == nil
}

// fresh reports whether the status at time at need not be written: the
// last write succeeded, differs only in its times, and will still be
// younger than bound at the next loop if that comes as long after this
// call as this call after the previous one. It records the call.
func (l *lastWrite) fresh(at time.Time, timed bool, st *Status, unremovable []UnremovableNode,
	sections map[string]string, bound time.Duration) bool {
	prev := l.called
	if timed {
		l.called = at
	}
	if !timed || !l.ok || bound <= 0 || prev.IsZero() {
		return false
	}
	gap, age := at.Sub(prev), at.Sub(l.at)
	if gap < 0 || age < 0 || age+gap > bound {
		return false
	}
	return slices.Equal(unremovable, l.unremovable) && maps.Equal(sections, l.sections) &&
		reflect.DeepEqual(withoutTimes(st), l.status)
}

// wrote records the outcome of a write: written is the server's answer, nil
// when the write failed.
func (l *lastWrite) wrote(written *apiv1.ConfigMap, at time.Time, timed bool, st *Status,
	unremovable []UnremovableNode, sections map[string]string) {
	l.cm, l.ok = written, written != nil && timed
	if !l.ok {
		l.status, l.unremovable, l.sections = Status{}, nil, nil
		return
	}
	l.at, l.status = at, withoutTimes(st)
	l.unremovable, l.sections = slices.Clone(unremovable), maps.Clone(sections)
}

// unremovableYAML encodes the unremovable list (nil for none), reusing the
// last encoding when the list is the same.
func (l *lastWrite) unremovableYAML(unremovable []UnremovableNode) ([]byte, error) {
	if len(unremovable) == 0 {
		return nil, nil
	}
	if l.encoded != nil && slices.Equal(unremovable, l.encodedFor) {
		return l.encoded, nil
	}
	out, err := yaml.Marshal(unremovable)
	if err != nil {
		return nil, err
	}
	l.encodedFor, l.encoded = slices.Clone(unremovable), out
	return out, nil
}

// probeMark stands for any probe time that is set.
var probeMark = metav1.NewTime(time.Unix(1, 0).UTC())

// withoutTimes is st without what changes at every loop: its time and the
// probe times (which are set or not, the same in both). Transition times
// stay: a changed one is a change.
func withoutTimes(st *Status) Status {
	c := *st
	c.Time = ""
	mark := func(t *metav1.Time) {
		if !t.IsZero() {
			*t = probeMark
		}
	}
	mark(&c.ClusterWide.Health.LastProbeTime)
	mark(&c.ClusterWide.ScaleUp.LastProbeTime)
	mark(&c.ClusterWide.ScaleDown.LastProbeTime)
	c.NodeGroups = slices.Clone(st.NodeGroups)
	for i := range c.NodeGroups {
		g := &c.NodeGroups[i]
		mark(&g.Health.LastProbeTime)
		mark(&g.ScaleUp.LastProbeTime)
		mark(&g.ScaleDown.LastProbeTime)
	}
	return c
}

// put writes the ConfigMap fill fills in: an update of the last one
// written, else of the one read (created when missing). It returns the
// server's answer.
func (w *StatusWriter) put(ctx context.Context, fill func(*apiv1.ConfigMap)) (*apiv1.ConfigMap, error) {
	cms := w.Client.CoreV1().ConfigMaps(w.Namespace)
	if cm := w.last.cm; cm != nil {
		w.last.cm = nil
		fill(cm)
		out, err := cms.Update(ctx, cm, metav1.UpdateOptions{})
		if err == nil {
			return out, nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsNotFound(err) {
			return nil, err
		}
		// Changed or deleted by someone else since: read it again.
	}
	cm, err := cms.Get(ctx, w.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		cm = &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
		fill(cm)
		return cms.Create(ctx, cm, metav1.CreateOptions{})
	case err != nil:
		return nil, fmt.Errorf("reading the status ConfigMap: %w", err)
	}
	fill(cm)
	return cms.Update(ctx, cm, metav1.UpdateOptions{})
}
