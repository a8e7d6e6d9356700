package heapgovernor

import (
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"k8s.io/klog/v2"
)

func TestGCPercent(t *testing.T) {
	const mi = 1 << 20
	for _, c := range []struct {
		name  string
		live  uint64
		ratio float64
		want  int
	}{
		{"small heap: the 64 MiB floor is above GOGC=100's goal", 20 * mi, 0.25, 100},
		{"64 MiB live: the floor is GOGC=100", 64 * mi, 0.25, 100},
		{"160 MiB live: the 64 MiB floor", 160 * mi, 0.25, 40},
		{"large heap: a quarter of it", 1000 * mi, 0.25, 25},
		{"half of it", 1000 * mi, 0.5, 50},
		{"a ratio above 1 is GOGC=100", 1000 * mi, 3, 100},
		{"ratio 0: GOGC=100", 1000 * mi, 0, 100},
		{"nothing live yet", 0, 0.25, 100},
		{"a tiny ratio of a huge heap is at least 1", 1 << 50, 1e-9, 1},
	} {
		if got := gcPercent(c.live, c.ratio); got != c.want {
			t.Errorf("%s: gcPercent = %d, want %d", c.name, got, c.want)
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

// TestHeapGovernorFollowsTheLiveHeap: with 400 MiB live, the governor
// sets GOGC to 25 (a quarter) after a collection and no memory limit (no
// cgroup limit here); the environment's GOGC turns it off; stop restores
// what the runtime had.
func TestHeapGovernorFollowsTheLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if cgroupMemoryLimit("/sys/fs/cgroup", readSelfCgroup()) > 0 {
		t.Skip("the test process runs under a cgroup memory limit")
	}
	beforeLimit := debug.SetMemoryLimit(-1)
	beforePercent := debug.SetGCPercent(100)
	debug.SetGCPercent(beforePercent)
	live := make([][]byte, 400)
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	stop := Start(klog.Background(), 0.25)
	deadline := time.Now().Add(10 * time.Second)
	var percent int
	for time.Now().Before(deadline) {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // the finalizer goroutine runs the hook
		percent = debug.SetGCPercent(-1)
		debug.SetGCPercent(percent)
		if percent != 100 {
			break
		}
	}
	runtime.KeepAlive(live)
	if percent < 20 || percent > 26 {
		t.Errorf("GOGC with 400 MiB live = %d, want 20..26 (a quarter, the rest of the heap included)", percent)
	}
	if got := debug.SetMemoryLimit(-1); got != beforeLimit {
		t.Errorf("the governor set a memory limit (%d) without a cgroup limit", got)
	}
	stop()
	if got := debug.SetGCPercent(beforePercent); got != beforePercent {
		t.Errorf("after stop GOGC is %d, want the runtime's %d", got, beforePercent)
	}
	runtime.GC()

	t.Setenv("GOGC", "100")
	stop = Start(klog.Background(), 0.25)
	defer stop()
	runtime.GC()
	time.Sleep(10 * time.Millisecond)
	if got := debug.SetGCPercent(beforePercent); got != beforePercent {
		t.Errorf("with GOGC set the governor changed GOGC to %d", got)
	}
}

// TestHeapGovernorRoomIsNotEatenByFragments: 100 MiB live held in small
// objects that fill only half of their spans (200 MiB of heap memory), then
// 1 GiB of short-lived garbage. The room after a collection (64 MiB here)
// is room for new objects: about 16 collections. (Under the soft memory
// limit the governor set before, live + room + the runtime's other memory,
// the half-empty spans counted against the limit and the collector ran
// without pause: hundreds of collections.)
func TestHeapGovernorRoomIsNotEatenByFragments(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	if cgroupMemoryLimit("/sys/fs/cgroup", readSelfCgroup()) > 0 {
		t.Skip("the test process runs under a cgroup memory limit")
	}
	const obj = 1024
	all := make([]*[obj]byte, 200<<20/obj)
	for i := range all {
		all[i] = new([obj]byte)
	}
	for i := 0; i < len(all); i += 2 {
		all[i] = nil // every other object: each span half full
	}
	runtime.GC()
	stop := Start(klog.Background(), 0.25)
	defer stop()
	runtime.GC()
	time.Sleep(20 * time.Millisecond)
	cycles := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	start := cycles()
	var sink *[4096]byte
	for range 1 << 30 / 4096 {
		sink = new([4096]byte)
	}
	runtime.KeepAlive(sink)
	runtime.KeepAlive(all)
	n := cycles() - start
	t.Logf("%d collections", n)
	if n > 40 {
		t.Errorf("1 GiB of garbage with 64 MiB of room ran %d collections, want about 16 (at most 40)", n)
	}
}

func readSelfCgroup() string {
	b, _ := os.ReadFile("/proc/self/cgroup")
	return string(b)
}
