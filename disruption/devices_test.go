package disruption

import (
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
)

// lateDevices names the nodes that are Ready without their devices.
type lateDevices map[string]bool

func (l lateDevices) NotReadyYet(_ string, node *apiv1.Node) bool { return l[node.Name] }

// TestReplacementWaitsForItsDevices: a replacement whose Ready condition
// is true but whose devices (DRA slices, GPU resources) are not published
// yet, as the cluster state judges, does not count as Ready: the plan
// stays in Surging, nothing is drained, until the devices are there. Both
// ways of counting: a voluntary plan's new nodes (assigned), and a heal's
// Ready nodes against its count before.
func TestReplacementWaitsForItsDevices(t *testing.T) {
	t.Run("voluntary plan", func(t *testing.T) {
		late := lateDevices{}
		f := newFixture(t, Options{Readiness: late}, readyNode("old", nil), readyNode("b", nil))
		f.provider.AddNodeGroup("gpu", 0, 5, 0, nil)
		f.healer.AddSource(&fakeSource{reason: Drifted, cands: []Candidate{{Reason: Drifted, Nodes: []string{"old"},
			Replacement: []Replacement{{Group: "gpu", Count: 1}}}}})
		f.addPod(t, podOn("old", "web-0"))
		f.loop(0)
		if f.phase("old") != PhaseSurging {
			t.Fatalf("phase %q, want Surging", f.phase("old"))
		}
		repl := readyNode("gpu-1", nil)
		late["gpu-1"] = true
		f.provider.AddNode("gpu", repl)
		f.nodes = append(f.nodes, repl)
		for i := 1; i <= 3; i++ {
			f.loop(time.Duration(i) * time.Minute)
			if f.phase("old") != PhaseSurging {
				t.Fatalf("phase %q with the replacement Ready but its devices not published, want Surging", f.phase("old"))
			}
		}
		delete(late, "gpu-1")
		f.loop(4 * time.Minute)
		if f.phase("old") != PhaseDraining {
			t.Fatalf("phase %q once the devices are published, want Draining", f.phase("old"))
		}
	})
	t.Run("heal", func(t *testing.T) {
		late := lateDevices{}
		f := newFixture(t, Options{ReplaceFirst: true, Readiness: late}, readyNode("sick", map[string]string{Annotation: "disk"}),
			readyNode("ok", nil))
		f.addPod(t, podOn("sick", "web-0"))
		f.loop(0)
		if f.calls("IncreaseSize") != 1 || f.phase("sick") != PhaseSurging {
			t.Fatalf("IncreaseSize %d, phase %q: want the replacement asked for first", f.calls("IncreaseSize"), f.phase("sick"))
		}
		repl := readyNode("g-new", nil)
		late["g-new"] = true
		f.provider.AddNode("g", repl)
		f.nodes = append(f.nodes, repl)
		f.loop(time.Minute)
		if f.phase("sick") != PhaseSurging {
			t.Fatalf("phase %q with the replacement Ready but its devices not published, want Surging", f.phase("sick"))
		}
		delete(late, "g-new")
		f.loop(2 * time.Minute)
		if f.phase("sick") != PhaseDraining {
			t.Fatalf("phase %q once the devices are published, want Draining", f.phase("sick"))
		}
	})
}
