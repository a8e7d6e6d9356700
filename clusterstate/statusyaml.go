package clusterstate

import (
	"reflect"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// statusEncoder encodes statuses exactly as yaml.Marshal does, without
// encoding again a status that differs from the last one only in its time
// and probe times (what changes at every loop). It keeps the YAML of the
// last status with each of those times replaced by a stand-in (a time in
// year 1001, one per distinct value; a stand-in string for Time) and puts
// the times in as yaml.Marshal writes them. Should a stand-in's text occur
// in the YAML other than where the stand-ins are (an error message quoting
// it), the status is encoded in full.
type statusEncoder struct {
	ok   bool
	key  Status // the last status with the stand-ins
	yaml string // its YAML
	// standIns are the stand-ins' lines ("time: ..." first, then the
	// probe times' "lastProbeTime: ..."), as far as rendered.
	standIns []string
}

// timeStandIn stands for Status.Time.
const timeStandIn = "1001-01-01 00:00:00 +0000 STANDIN"

func probeStandIn(k int) metav1.Time {
	return metav1.NewTime(time.Date(1001, 1, 1, 0, 0, k+1, 0, time.UTC))
}

// encode returns yaml.Marshal(st).
func (e *statusEncoder) encode(st *Status) ([]byte, error) {
	key, times, uses := withStandIns(st)
	if !e.ok || !reflect.DeepEqual(key, e.key) {
		out, err := yaml.Marshal(&key)
		if err != nil {
			e.ok = false
			return nil, err
		}
		e.ok, e.key, e.yaml = true, key, string(out)
	}
	out := e.yaml
	replace := func(from, to string, n int) bool {
		if from == "" || to == "" || strings.Count(out, from) != n {
			return false
		}
		out = strings.ReplaceAll(out, from, to)
		return true
	}
	if key.Time != "" && !replace(e.standIn(0), renderLine("time", st.Time), 1) {
		return yaml.Marshal(st)
	}
	for k, t := range times {
		if !replace(e.standIn(k+1), renderLine("lastProbeTime", metav1.NewTime(t)), uses[k]) {
			return yaml.Marshal(st)
		}
	}
	return []byte(out), nil
}

// standIn returns the line of stand-in i: 0 for Time, k+1 for
// probeStandIn(k).
func (e *statusEncoder) standIn(i int) string {
	for len(e.standIns) <= i {
		if j := len(e.standIns); j == 0 {
			e.standIns = append(e.standIns, renderLine("time", timeStandIn))
		} else {
			e.standIns = append(e.standIns, renderLine("lastProbeTime", probeStandIn(j-1)))
		}
	}
	return e.standIns[i]
}

// renderLine is the line yaml.Marshal writes for key: v in a mapping, from
// the key to the line end included ("" when it cannot encode it on one
// line).
func renderLine(key string, v any) string {
	out, err := yaml.Marshal(map[string]any{key: v})
	if err != nil || !strings.HasPrefix(string(out), key+": ") || strings.Count(string(out), "\n") != 1 {
		return ""
	}
	return string(out)
}

// withStandIns is st with Time and each set probe time replaced by
// stand-ins: the k-th distinct probe time (times[k], used uses[k] times)
// by probeStandIn(k).
func withStandIns(st *Status) (key Status, times []time.Time, uses []int) {
	key = *st
	if key.Time != "" {
		key.Time = timeStandIn
	}
	key.NodeGroups = slices.Clone(st.NodeGroups)
	put := func(t *metav1.Time) {
		if t.IsZero() {
			return
		}
		k := slices.IndexFunc(times, func(u time.Time) bool { return u.Equal(t.Time) })
		if k < 0 {
			k = len(times)
			times, uses = append(times, t.Time), append(uses, 0)
		}
		uses[k]++
		*t = probeStandIn(k)
	}
	put(&key.ClusterWide.Health.LastProbeTime)
	put(&key.ClusterWide.ScaleUp.LastProbeTime)
	put(&key.ClusterWide.ScaleDown.LastProbeTime)
	for i := range key.NodeGroups {
		g := &key.NodeGroups[i]
		put(&g.Health.LastProbeTime)
		put(&g.ScaleUp.LastProbeTime)
		put(&g.ScaleDown.LastProbeTime)
	}
	return key, times, uses
}
