package main

import (
	"fmt"
	"io"
	"os"
	"time"

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

// whatIfObject is one manifest object's answer.
type whatIfObject struct {
	Kind      string             `json:"kind"`
	Namespace string             `json:"namespace"`
	Name      string             `json:"name"`
	Pods      int                `json:"pods"`
	PodGroups []explain.PodGroup `json:"podGroups"`
}

// writeWhatIf writes which groups the simulated loop would grow and by how
// much, and for each object the verdicts on its pods.
func writeWhatIf(rec *explain.Recorder, objects []whatif.Object, increases []readonly.Increase, asJSON bool, out io.Writer) error {
	at := rec.At()
	answers := make([]whatIfObject, 0, len(objects))
	for _, o := range objects {
		a := whatIfObject{Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Pods: len(o.Pods)}
		seen := map[string]bool{}
		for _, p := range o.Pods {
			g, _, ok := rec.Pod(p.Namespace + "/" + p.Name)
			if !ok || len(g.Pods) == 0 || seen[g.Pods[0]] {
				continue
			}
			seen[g.Pods[0]] = true
			a.PodGroups = append(a.PodGroups, g)
		}
		answers = append(answers, a)
	}
	if asJSON {
		return encodeJSON(out, struct {
			At        time.Time           `json:"at"`
			Increases []readonly.Increase `json:"increases"`
			Objects   []whatIfObject      `json:"objects"`
		}{at, increases, answers})
	}
	if _, err := fmt.Fprintf(out, "What if the manifests were created now (simulated loop at %s):\n", at.UTC().Format(time.RFC3339)); err != nil {
		return err
	}
	if len(increases) == 0 {
		_, _ = fmt.Fprintln(out, "No node group would grow.")
	}
	for _, inc := range increases {
		_, _ = fmt.Fprintf(out, "Node group %s would grow by %d node(s)\n", inc.NodeGroup, inc.Delta)
	}
	for _, a := range answers {
		_, _ = fmt.Fprintf(out, "\n== %s %s/%s: %d pod(s)\n", a.Kind, a.Namespace, a.Name, a.Pods)
		if len(a.PodGroups) == 0 {
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
