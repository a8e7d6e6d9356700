package clusterstate

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The encoder's YAML is yaml.Marshal's, byte for byte, over a seeded
// random stream of statuses: mostly only the times change (probe times
// equal to each other or not, set or zero, with sub-second parts), now and
// then the content (groups, counts, back-off messages, among them ones
// quoting a stand-in's line or spanning lines).
func TestStatusEncoderIsYAMLMarshal(t *testing.T) {
	messages := []string{"", "quota exceeded", "a: b", "line one\nline two",
		"lastProbeTime: \"1001-01-01T00:00:01Z\"", "time: 1001-01-01 00:00:00 +0000 STANDIN", "it's \"quoted\" #1",
		"see\nlastProbeTime: \"1001-01-01T00:00:01Z\"\ntime: 1001-01-01 00:00:00 +0000 STANDIN\nend"}
	for seed := uint64(1); seed <= 3; seed++ {
		rnd := rand.New(rand.NewPCG(seed, 7))
		base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
		// A probe time's pattern: -1 zero, else now minus that many seconds;
		// drawn again with the content.
		patterns := make([]int, 16)
		draw := func() {
			for i := range patterns {
				patterns[i] = rnd.IntN(5) - 1
				if patterns[i] > 1 {
					patterns[i] = 0
				}
			}
		}
		draw()
		probe := func(now time.Time, i int) metav1.Time {
			if patterns[i] < 0 {
				return metav1.Time{}
			}
			return metav1.NewTime(now.Add(-time.Duration(patterns[i]) * time.Second))
		}
		pool := func(now time.Time) metav1.Time { return probe(now, rnd.IntN(len(patterns))) }
		st := statusAt(base, base, 0)
		var e statusEncoder
		hits := 0
		for step := range 300 {
			now := base.Add(time.Duration(step)*1500*time.Millisecond + time.Duration(rnd.IntN(1000))*time.Microsecond)
			st.Time = now.Format(StatusTimeLayout)
			if rnd.IntN(6) == 0 { // content
				st.NodeGroups = st.NodeGroups[:0]
				for i := range rnd.IntN(4) {
					g := NodeGroupStat{Name: fmt.Sprintf("pool-%d", i)}
					g.Health.Status, g.Health.MaxSize, g.Health.NodeCounts.Registered.Total = HealthHealthy, 3+i, rnd.IntN(3)
					g.ScaleUp.Status = ScaleUpBackoff
					g.ScaleUp.BackoffInfo.ErrorMessage = messages[rnd.IntN(len(messages))]
					g.ScaleUp.LastTransitionTime = pool(base)
					st.NodeGroups = append(st.NodeGroups, g)
				}
				st.ClusterWide.ScaleDown.Candidates = rnd.IntN(3)
				draw()
			}
			st.ClusterWide.Health.LastProbeTime = probe(now, 0)
			st.ClusterWide.ScaleUp.LastProbeTime = st.ClusterWide.Health.LastProbeTime
			st.ClusterWide.ScaleDown.LastProbeTime = probe(now, 1)
			for i := range st.NodeGroups {
				g := &st.NodeGroups[i]
				g.Health.LastProbeTime, g.ScaleUp.LastProbeTime, g.ScaleDown.LastProbeTime =
					probe(now, 2+3*i), probe(now, 3+3*i), probe(now, 4+3*i)
			}
			key, _, _ := withStandIns(st)
			if e.ok && reflect.DeepEqual(key, e.key) {
				hits++
			}
			got, err := e.encode(st)
			if err != nil {
				t.Fatal(err)
			}
			want, err := yaml.Marshal(st)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Fatalf("seed %d step %d: encoded\n%s\nwant\n%s", seed, step, got, want)
			}
		}
		if hits < 100 {
			t.Errorf("seed %d: %d statuses from the kept YAML, the stream does not exercise it", seed, hits)
		}
	}
}
