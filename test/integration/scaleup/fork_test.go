package scaleup

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// forkAnchor is the line of builder/processors.go after which the FAQ's
// fork adds its processor.
const forkAnchor = "processors.ScaleUpDelay{Delay: opts.NewPodScaleUpDelay},"

// buildFork builds a fork of the binary that differs from it by one line in
// the composition root (package builder): line is added to the pod-list
// processors, after forkAnchor (FAQ: "How do I extend it in my own build?").
// The fork is package main and package builder copied into one folder, main
// importing the copied builder.
func buildFork(t *testing.T, line string) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	// Inside the module, so that the fork imports its packages; _output is
	// ignored by ./... and by git.
	dir, err := os.MkdirTemp(filepath.Join(root, "_output"), "fork-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	const builderPkg = `"k8s.io/autoscaler/cluster-autoscaler/builder"`
	forkBuilder := `"k8s.io/autoscaler/cluster-autoscaler/_output/` + filepath.Base(dir) + `/builder"`
	copyPackage(t, filepath.Join(root, "builder"), filepath.Join(dir, "builder"), func(name string, data []byte) []byte {
		if name != "processors.go" {
			return data
		}
		before := strings.Count(string(data), "\n")
		if strings.Count(string(data), forkAnchor) != 1 {
			t.Fatalf("builder/processors.go has no single %q line for the fork to follow", forkAnchor)
		}
		data = []byte(strings.Replace(string(data), forkAnchor, forkAnchor+"\n\t\t\t"+line, 1))
		if after := strings.Count(string(data), "\n"); after != before+1 {
			t.Fatalf("the fork changed %d lines, want 1", after-before)
		}
		return data
	})
	copyPackage(t, filepath.Join(root, "cluster-autoscaler"), dir, func(_ string, data []byte) []byte {
		return []byte(strings.ReplaceAll(string(data), builderPkg, forkBuilder))
	})
	bin := filepath.Join(t.TempDir(), "cluster-autoscaler-fork")
	if err := framework.GoBuild(filepath.Dir(dir), bin, "./"+filepath.Base(dir), false); err != nil {
		t.Fatalf("building the fork: %v", err)
	}
	return bin
}

// copyPackage copies the non-test Go files of the folder src into dst
// through edit.
func copyPackage(t *testing.T, src, dst string, edit func(name string, data []byte) []byte) {
	t.Helper()
	if err := os.MkdirAll(dst, 0o700); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, ent := range entries {
		if ent.IsDir() || !strings.HasSuffix(ent.Name(), ".go") || strings.HasSuffix(ent.Name(), "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, ent.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, ent.Name()), edit(ent.Name(), data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestForkAddsAPodListProcessor: the FAQ's example fork (the
// IgnoreNamespaces processor added with one line) runs against the control
// plane: the pending pods of the ignored namespace trigger no scale-up while
// the others do; the same cluster under the stock binary then scales up for
// them, so it was the processor that held them back.
func TestForkAddsAPodListProcessor(t *testing.T) {
	e := framework.New(t)
	sandbox := e.Namespace + "-sandbox"
	if _, err := e.Client.CoreV1().Namespaces().Create(e.Context(),
		&apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sandbox}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Client.CoreV1().Namespaces().Delete(context.Background(), sandbox, metav1.DeleteOptions{})
	})
	fork := buildFork(t, fmt.Sprintf("processors.IgnoreNamespaces{Namespaces: []string{%q}},", sandbox))
	path, small, large := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	pool := map[string]string{"pool": small}
	// Two 1-CPU pods need one 4-CPU node of the small group. The sandbox's
	// 3-CPU pods select the large group, so that the scheduler can never
	// put one on the web pods' new node (it did, in a CI run, when they
	// were in the same group: the node then held one web pod and one
	// sandbox pod, and the other web pod asked for a second node).
	itest.CreatePods(e, "web", 2, "1", pool)
	for i := 0; i < 2; i++ {
		pod := framework.MakePod(sandbox, fmt.Sprintf("sandboxed-%d", i)).Req("3", "1Gi").NodeSelector("pool", large).Obj()
		if _, err := e.Client.CoreV1().Pods(sandbox).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	p := itest.StartAutoscalerBinary(t, fork, "fork", itest.ScaleUpArgs(e, path)...)
	e.Eventually(60*time.Second, "the 2 pods of the test's namespace Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
	// Several more loops (scan interval 1s) while the sandbox's pods are
	// marked unschedulable.
	e.Eventually(30*time.Second, "the fork's log line for the ignored pods", func(context.Context) (bool, error) {
		return p.Log.Contains(`"Pending pods of ignored namespaces do not trigger a scale-up"`), nil
	})
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e); got[small] != 1 || got[large] != 0 {
		t.Fatalf("nodes under the fork: %d in %s, %d in %s; want 1 and 0 (the sandbox's pods ignored)",
			got[small], small, got[large], large)
	}
	if n := sandboxRunning(t, e, sandbox); n != 0 {
		t.Fatalf("%d sandbox pods Running under the fork, want 0", n)
	}
	if code := p.Terminate(30 * time.Second); code != 0 {
		t.Fatalf("the fork exited with %d", code)
	}

	// The stock binary serves them: one large node holds both 3-CPU pods.
	itest.StartAutoscaler(t, "stock", itest.ScaleUpArgs(e, path)...)
	e.Eventually(60*time.Second, "the sandbox's pods Running under the stock binary", func(context.Context) (bool, error) {
		return sandboxRunning(t, e, sandbox) == 2, nil
	})
	if got := itest.NodesPerPool(e); got[small] != 1 || got[large] != 1 {
		t.Errorf("nodes under the stock binary: %d in %s, %d in %s; want 1 and 1", got[small], small, got[large], large)
	}
}

func sandboxRunning(t *testing.T, e *framework.Env, namespace string) int {
	t.Helper()
	pods, err := e.Client.CoreV1().Pods(namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range pods.Items {
		if p.Status.Phase == apiv1.PodRunning {
			n++
		}
	}
	return n
}
