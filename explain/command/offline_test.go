package command

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/explain/readonly"
)

// TestOfflineSourceRejectsBadDumps: a dump that cannot be loaded (not
// JSON, the old format, the same pod twice) is an error that says why,
// never a crash.
func TestOfflineSourceRejectsBadDumps(t *testing.T) {
	const head = `{"StartTimestamp":"2026-11-27T10:00:00Z","NodeGroups":[],"NodeGroupOfNode":{},`
	for name, tc := range map[string]struct{ dump, want string }{
		"not JSON":   {"{", "decoding the dump"},
		"old format": {`{"StartTimestamp":"2026-11-27T10:00:00Z","NodeList":[]}`, "cannot be explained offline"},
		"pod twice": {head + `"NodeList":[{"Node":{"metadata":{"name":"n"}},"Pods":[{"metadata":{"name":"p","namespace":"x"}}]}],
			"PendingPods":[{"metadata":{"name":"p","namespace":"x"}}]}`, "loading Pod x/p from the dump"},
	} {
		path := filepath.Join(t.TempDir(), "dump.json")
		if err := os.WriteFile(path, []byte(tc.dump), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := offlineSource(config.Defaults(), path, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", name, err, tc.want)
		}
	}
	path := filepath.Join(t.TempDir(), "dump.json")
	if err := os.WriteFile(path, []byte(head+`"NodeList":[{"Node":{"metadata":{"name":"n"}},"Pods":[]}],"PendingPods":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	src, err := offlineSource(config.Defaults(), path, io.Discard)
	if err != nil || src.opts.CloudProvider != "snapshot" || src.restConfig != nil || !src.now.Equal(mustTime(t, "2026-11-27T10:00:00Z")) {
		t.Fatalf("offlineSource of a minimal dump: %+v, %v", src, err)
	}
	// The in-memory client reads the dump and refuses every write.
	ctx := context.Background()
	if _, err := src.client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
		t.Errorf("reading the dump's node: %v", err)
	}
	writes := map[string]error{
		"create": func() error {
			_, err := src.client.CoreV1().Events("x").Create(ctx, &apiv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e"}}, metav1.CreateOptions{})
			return err
		}(),
		"delete": src.client.CoreV1().Nodes().Delete(ctx, "n", metav1.DeleteOptions{}),
		"patch": func() error {
			_, err := src.client.CoreV1().Nodes().Patch(ctx, "n", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
			return err
		}(),
	}
	for verb, err := range writes {
		if !errors.Is(err, readonly.ErrWrite) {
			t.Errorf("%s through the offline client: %v, want readonly.ErrWrite", verb, err)
		}
	}
	if _, err := src.client.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{}); err != nil {
		t.Errorf("the dump's node after a refused delete: %v", err)
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}
