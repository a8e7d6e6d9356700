package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/autoscaler/cluster-autoscaler/core"
)

// TestSnapshotDumpRoundTripsIntoTheLoopFixture: a small cluster put in the
// loop benchmark's caches, served by /snapshotz after a loop, written to a
// file and read back as LOOP_BENCH_SNAPSHOT reads it, makes the same
// fixture: nodes and their groups, templates, pods on the same nodes with
// the same requests, pending pods, ReplicaSets.
func TestSnapshotDumpRoundTripsIntoTheLoopFixture(t *testing.T) {
	want, err := loopClusterOf(syntheticCluster(synthSpec{Nodes: 4, PodsPerNode: 3, LowNodes: 1, Pending: 5}))
	if err != nil {
		t.Fatal(err)
	}
	h := newLoopHarness(t, want, nil)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	snapshots := core.NewSnapshotter()
	a, _, _ := h.loop(t, ctx, core.WithSnapshotter(snapshots))
	server := httptest.NewServer(snapshots)
	defer server.Close()

	type answer struct {
		body []byte
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, server.URL+"/snapshotz", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("status %d", resp.StatusCode)
		} else {
			err = json.NewDecoder(resp.Body).Decode(&raw)
		}
		got <- answer{body: raw, err: err}
	}()
	var dump answer
	for done := false; !done; {
		// The request may not be waiting yet: loop until it is answered.
		if _, err := a.RunOnce(ctx, benchStart); err != nil {
			t.Fatal(err)
		}
		select {
		case dump = <-got:
			done = true
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			t.Fatal("/snapshotz was not answered within a minute")
		}
	}
	if dump.err != nil {
		t.Fatalf("GET /snapshotz: %v", dump.err)
	}
	path := filepath.Join(t.TempDir(), "snapshotz.json")
	if err := os.WriteFile(path, dump.body, 0o600); err != nil {
		t.Fatal(err)
	}
	snap, err := readSnapshotFile(path)
	if err != nil {
		t.Fatal(err)
	}
	back, err := loopClusterOf(snap)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Nodes) != 4 || len(back.Pods) != 4*3+5 || len(back.Groups) != 2 {
		t.Fatalf("dump read back: %d nodes, %d pods, %d groups; want 4, 17, 2", len(back.Nodes), len(back.Pods), len(back.Groups))
	}
	if diff := cmp.Diff(summarize(want), summarize(back)); diff != "" {
		t.Errorf("fixture after the round trip (-before +after):\n%s", diff)
	}
}

// TestSnapshotDumpBadInput: a file that is not a dump, or a dump with a hole,
// is a clear error.
func TestSnapshotDumpBadInput(t *testing.T) {
	dir := t.TempDir()
	for name, body := range map[string]string{
		"not-json":     "<html>",
		"error":        `{"Error":"no loop ran"}`,
		"node-missing": `{"NodeList":[{"Pods":[]}]}`,
		"template-nil": `{"TemplateNodes":{"a":null}}`,
		"twice":        `{"NodeList":[{"Node":{"metadata":{"name":"n"}}},{"Node":{"metadata":{"name":"n"}}}]}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		snap, err := readSnapshotFile(path)
		if err == nil {
			_, err = loopClusterOf(snap)
		}
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := readSnapshotFile(filepath.Join(dir, "absent")); err == nil {
		t.Error("absent file: no error")
	}
}

type fixtureSummary struct {
	Groups      map[string][]string // group -> template name, then its nodes
	Pods        []string            // node/namespace/name cpu memory
	ReplicaSets map[string]int32
}

func summarize(c *loopCluster) fixtureSummary {
	s := fixtureSummary{Groups: map[string][]string{}, ReplicaSets: map[string]int32{}}
	for _, g := range c.Groups {
		s.Groups[g.ID] = append([]string{g.Template.Name}, g.Nodes...)
	}
	for _, p := range c.Pods {
		r := p.Spec.Containers[0].Resources.Requests
		s.Pods = append(s.Pods, fmt.Sprintf("%s/%s/%s %s %s", p.Spec.NodeName, p.Namespace, p.Name, r.Cpu(), r.Memory()))
	}
	sort.Strings(s.Pods)
	for _, rs := range c.ReplicaSets {
		s.ReplicaSets[rs.Namespace+"/"+rs.Name] = *rs.Spec.Replicas
	}
	return s
}
