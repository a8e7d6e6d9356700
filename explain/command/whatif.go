package command

import (
	"fmt"
	"io"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/explain"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
	"k8s.io/autoscaler/cluster-autoscaler/explain/whatif"
)

// readManifests reads the what-if manifests of `explain -f` ("-" is stdin).
// Their pods are made an hour older than the simulated loop (at), so that
// --new-pod-scale-up-delay does not hold them back.
func readManifests(path string, at time.Time) ([]whatif.Object, error) {
	var r io.Reader = os.Stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("-f: %w", err)
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	objects, err := whatif.Read(r, at.Add(-time.Hour))
	if err != nil {
		return nil, fmt.Errorf("-f %s: %w", path, err)
	}
	return objects, nil
}

// whatIfObject is one manifest object's answer; for a
// ProvisioningRequest, Conditions are those the loop would set.
type whatIfObject struct {
	Kind       string             `json:"kind"`
	Namespace  string             `json:"namespace"`
	Name       string             `json:"name"`
	Pods       int                `json:"pods"`
	PodGroups  []explain.PodGroup `json:"podGroups"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// whatIfResult is what the simulated loop of `explain -f` left.
type whatIfResult struct {
	rec       *explain.Recorder
	objects   []whatif.Object
	increases []readonly.Increase
	statuses  *statusRecorder
	// cost is set when the expanders include price.
	cost *whatIfCost
}

// answers are the objects' answers (PodTemplates have none of their own).
func (r whatIfResult) answers() []whatIfObject {
	answers := make([]whatIfObject, 0, len(r.objects))
	for _, o := range r.objects {
		a := whatIfObject{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Pods: len(o.Pods)}
		switch {
		case o.Template != nil:
			continue
		case o.Request != nil:
			a.PodGroups, _ = r.rec.Request(o.Namespace + "/" + o.Name)
			for _, ps := range o.Request.Spec.PodSets {
				a.Pods += int(ps.Count)
			}
			if st, ok := r.statuses.status(o.Namespace + "/" + o.Name); ok {
				a.Conditions = st.Conditions
			}
		}
		seen := map[string]bool{}
		for _, p := range o.Pods {
			g, _, ok := r.rec.Pod(p.Namespace + "/" + p.Name)
			if !ok || len(g.Pods) == 0 || seen[g.Pods[0]] {
				continue
			}
			seen[g.Pods[0]] = true
			a.PodGroups = append(a.PodGroups, g)
		}
		answers = append(answers, a)
	}
	return answers
}

// writeWhatIf writes which groups the simulated loop would grow and by how
// much (and at what cost), and for each object the verdicts on its pods
// and, for a ProvisioningRequest, the conditions it would get.
func writeWhatIf(r whatIfResult, asJSON bool, out io.Writer) error {
	at := r.rec.At()
	answers := r.answers()
	if asJSON {
		return encodeJSON(out, struct {
			At        time.Time           `json:"at"`
			Increases []readonly.Increase `json:"increases"`
			Cost      *whatIfCost         `json:"cost,omitempty"`
			Objects   []whatIfObject      `json:"objects"`
		}{at, r.increases, r.cost, answers})
	}
	if _, err := fmt.Fprintf(out, "What if the manifests were created now (simulated loop at %s):\n", at.UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	if len(r.increases) == 0 {
		_, _ = fmt.Fprintln(out, "No node group would grow.")
	}
	for _, inc := range r.increases {
		_, _ = fmt.Fprintf(out, "Node group %s would grow by %d node(s)%s\n", inc.NodeGroup, inc.Delta, r.cost.of(inc))
	}
	r.cost.write(out)
	for _, a := range answers {
		_, _ = fmt.Fprintf(out, "\n== %s %s/%s: %d pod(s)\n", a.Kind, a.Namespace, a.Name, a.Pods)
		for _, c := range a.Conditions {
			_, _ = fmt.Fprintf(out, "would set %s=%s (%s): %s\n", c.Type, c.Status, c.Reason, c.Message)
		}
		switch {
		case len(a.PodGroups) > 0:
		case a.Kind == "ProvisioningRequest" && len(a.Conditions) > 0:
			_, _ = fmt.Fprintln(out, "(no scale-up for its pods: the conditions above say why)")
		default:
			_, _ = fmt.Fprintln(out, "not considered by the simulated loop (expendable, or already fits a running node before the scale-up)")
		}
		for _, g := range a.PodGroups {
			if err := explain.WritePodGroup(out, g, at); err != nil {
				return err
			}
		}
	}
	return nil
}
