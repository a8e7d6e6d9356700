package heapgovernor

import (
	"math"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

func TestHeapLimit(t *testing.T) {
	const mi = 1 << 20
	for _, c := range []struct {
		name          string
		nonHeap, live uint64
		ratio         float64
		ceiling, want int64
	}{
		{"small heap: the 64 MiB floor, above GOGC's goal", 10 * mi, 20 * mi, 0.25, 0, 94 * mi},
		{"large heap: a quarter of it", 30 * mi, 300 * mi, 0.25, 0, 405 * mi},
		{"the cgroup ceiling wins when lower", 30 * mi, 300 * mi, 0.25, 360 * mi, 360 * mi},
		{"ratio 0 without a cgroup: no limit", 30 * mi, 300 * mi, 0, 0, math.MaxInt64},
		{"ratio 0 with a cgroup: its ceiling", 30 * mi, 300 * mi, 0, 900 * mi, 900 * mi},
		{"a huge ratio does not overflow", 0, 1 << 62, 1e6, 0, math.MaxInt64},
	} {
		if got := heapLimit(c.nonHeap, c.live, c.ratio, c.ceiling); got != c.want {
			t.Errorf("%s: heapLimit = %d MiB, want %d MiB", c.name, got/mi, c.want/mi)
		}
	}
}

func TestCgroupMemoryLimit(t *testing.T) {
	write := func(t *testing.T, root, rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name, self string
		files      map[string]string
		want       int64
	}{
		{"v2, own path", "0::/kubepods/pod1/c1\n", map[string]string{"kubepods/pod1/c1/memory.max": "1073741824\n"}, 1 << 30},
		{"v2, namespaced root", "0::/\n", map[string]string{"memory.max": "536870912\n"}, 512 << 20},
		{"v2, no limit", "0::/\n", map[string]string{"memory.max": "max\n"}, 0},
		{"v1 (hybrid host)", "4:memory:/app\n0::/\n", map[string]string{"memory/app/memory.limit_in_bytes": "2147483648"}, 2 << 30},
		{"v1, no limit", "4:memory:/app\n", map[string]string{"memory/app/memory.limit_in_bytes": "9223372036854771712"}, 0},
		{"nothing readable", "garbage", nil, 0},
		{"not a number", "0::/\n", map[string]string{"memory.max": "lots"}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, content := range c.files {
				write(t, root, rel, content)
			}
			if got := cgroupMemoryLimit(root, c.self); got != c.want {
				t.Errorf("cgroupMemoryLimit = %d, want %d", got, c.want)
			}
		})
	}
}

// TestHeapGovernorFollowsTheLiveHeap: with 400 MiB live, the limit the
// governor sets after a collection lies between the live heap plus a
// quarter and that plus the runtime's own memory; the environment's GOGC
// turns it off; stop restores the limit the runtime had.
func TestHeapGovernorFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	before := debug.SetMemoryLimit(-1)
	live := make([][]byte, 400)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	stop := Start(klog.Background(), 0.25)
	deadline := time.Now().Add(10 * time.Second)
	var limit int64
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer goroutine runs the hook
		if limit = debug.SetMemoryLimit(-1); limit != before {
			break
		}
	}
	runtime.KeepAlive(live)
	low, high := int64(500<<20), int64(700<<20)
	if limit < low || limit > high {
		t.Errorf("limit with 400 MiB live = %d MiB, want %d..%d MiB", limit>>20, low>>20, high>>20)
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("after stop the limit is %d, want the runtime's %d", got, before)
	}
	live = nil
	runtime.GC()

	t.Setenv("GOGC", "100")
	stop = Start(klog.Background(), 0.25)
	defer stop()
	runtime.GC()
	if got := debug.SetMemoryLimit(-1); got != before {
		t.Errorf("with GOGC set the governor changed the limit to %d", got)
	}
}
