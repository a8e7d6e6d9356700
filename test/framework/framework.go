package framework

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"k8s.io/autoscaler/cluster-autoscaler/test/localcluster"
)

// ReuseEnv names a kubeconfig of an already running local cluster to use
// instead of starting one (for example _output/local/kubeconfig after
// hack/local-up.sh).
const ReuseEnv = "LOCAL_CLUSTER_KUBECONFIG"

// TestNamespaceLabel marks cluster-scoped objects (nodes) a test created;
// they are deleted with the test's namespace.
const TestNamespaceLabel = "test.autoscaler/namespace"

// kubeconfig of the package's control plane, set by Main.
var kubeconfig string

// cluster is the control plane Main started; nil when it reuses one.
var cluster *localcluster.Cluster

// Main starts the control plane, runs the package's tests and stops it (when -run
// selects none of them, it starts nothing: NothingToRun). Use
// it from TestMain: func TestMain(m *testing.M) { os.Exit(framework.Main(m)) }.
func Main(m *testing.M) int {
	if NothingToRun() {
		return m.Run()
	}
	if kc := os.Getenv(ReuseEnv); kc != "" {
		kubeconfig = kc
		return m.Run()
	}
	cfg, err := controlPlaneConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "framework:", err)
		return 1
	}
	dir := cfg.Dir
	start := time.Now()
	c, err := localcluster.Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "framework: starting the local control plane (logs in %s): %v\n", dir, err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "framework: control plane healthy in %.1fs (%s)\n", time.Since(start).Seconds(), dir)
	kubeconfig, cluster = c.Kubeconfig, c
	code := m.Run()
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "framework: stopping the control plane:", err)
	}
	reportCPU(start)
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "framework: control-plane logs kept in %s\n", filepath.Join(dir, "logs"))
	}
	return code
}

// RestartAPIServer kills the package's kube-apiserver (SIGKILL), leaves it
// down for downtime and starts it again on the same port with the same
// certificates and data; it returns once the API server is ready. A test on
// a reused control plane ($LOCAL_CLUSTER_KUBECONFIG) is skipped: that
// API server is not this process's to restart.
func RestartAPIServer(t testing.TB, downtime time.Duration) {
	t.Helper()
	if cluster == nil {
		t.Skipf("the control plane is reused (%s): its kube-apiserver cannot be restarted from here", ReuseEnv)
	}
	if err := cluster.RestartAPIServer(t.Context(), downtime); err != nil {
		t.Fatal(err)
	}
}

// ComponentLogTail is the last n bytes of a control-plane component's log
// ("kube-scheduler"), for a test that fails on what the component did; ""
// when the control plane is reused (not this process's).
func ComponentLogTail(name string, n int64) string {
	if cluster == nil {
		return ""
	}
	return cluster.LogTail(name, n)
}

// Env is one test's view of the cluster.
type Env struct {
	T          testing.TB
	Config     *rest.Config
	Client     kubernetes.Interface
	Kubeconfig string
	Namespace  string

	describers []func(context.Context) string
}

// DescribeOnTimeout adds f to what an Eventually that times out logs
// before the test fails: a short account of the state the test waited on
// (Machines, their phases), first in the failed test's output, before the
// processes' logs.
func (e *Env) DescribeOnTimeout(f func(ctx context.Context) string) {
	e.describers = append(e.describers, f)
}

// New returns a client and a fresh namespace that is deleted, with the nodes
// the test created, when the test ends.
func New(t testing.TB) *Env {
	t.Helper()
	if kubeconfig == "" {
		t.Fatal("framework.Main was not called from TestMain")
	}
	if cluster != nil {
		if exited := cluster.Exited(); exited != "" {
			t.Fatalf("the package's control plane lost a component; the tests after it cannot pass:\n%s", exited)
		}
	}
	e := newEnv(t, kubeconfig)
	t.Cleanup(e.cleanup)
	return e
}

// newEnv is New on the cluster of the given kubeconfig, without the
// cleanup (a private cluster is thrown away whole).
func newEnv(t testing.TB, kubeconfig string) *Env {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("loading %s: %v", kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := &Env{T: t, Config: cfg, Client: client, Kubeconfig: kubeconfig, Namespace: namespaceName(t)}
	ns := &apiv1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.Namespace}}
	if _, err := client.CoreV1().Namespaces().Create(e.Context(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating namespace %s: %v", e.Namespace, err)
	}
	return e
}

// Context returns a context that ends with the test.
func (e *Env) Context() context.Context { return e.T.Context() }

func (e *Env) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sel := metav1.ListOptions{LabelSelector: TestNamespaceLabel + "=" + e.Namespace}
	if err := e.Client.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		e.T.Logf("deleting the test's nodes: %v", err)
	}
	err := e.Client.CoreV1().Namespaces().Delete(ctx, e.Namespace, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		e.T.Logf("deleting namespace %s: %v", e.Namespace, err)
	}
}

// CreateNode creates a node that kwok manages, labelled for cleanup.
func (e *Env) CreateNode(node *apiv1.Node) *apiv1.Node {
	e.T.Helper()
	if node.Labels == nil {
		node.Labels = map[string]string{}
	}
	node.Labels[TestNamespaceLabel] = e.Namespace
	created, err := e.Client.CoreV1().Nodes().Create(e.Context(), node, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatalf("creating node %s: %v", node.Name, err)
	}
	return created
}

// Eventually polls cond every 200 ms until it returns true or timeout passes.
func (e *Env) Eventually(timeout time.Duration, what string, cond func(ctx context.Context) (bool, error)) {
	e.T.Helper()
	err := wait.PollUntilContextTimeout(e.Context(), 200*time.Millisecond, timeout, true, cond)
	if err != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if cluster != nil {
			if exited := cluster.Exited(); exited != "" {
				e.T.Logf("the package's control plane lost a component:\n%s", exited)
			}
		}
		for _, f := range e.describers {
			e.T.Log(f(ctx))
		}
		e.T.Fatalf("%s: not true after %v: %v", what, timeout, err)
	}
}

// UniqueName returns prefix plus a random suffix, valid as an object name.
func UniqueName(prefix string) string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

func namespaceName(t testing.TB) string {
	name := strings.ToLower(t.Name())
	var b strings.Builder
	for _, r := range name {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if len(base) > 50 {
		base = base[:50]
	}
	return UniqueName(strings.Trim(base, "-"))
}

// RepoRoot finds the repository root: the directory of this module's go.mod.
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err == nil {
		if mod := strings.TrimSpace(string(out)); mod != "" && mod != os.DevNull {
			return filepath.Dir(mod), nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}

// reportCPU prints the CPU time the package took against its wall time
// since start: the test process's own and that of the processes it waited
// for (the control plane, the binaries it ran, go build), so that
// docs/test-times.md can say which packages wait and which compute.
func reportCPU(start time.Time) {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return
	}
	sec := func(u syscall.Rusage) float64 {
		return time.Duration(u.Utime.Nano() + u.Stime.Nano()).Seconds()
	}
	fmt.Fprintf(os.Stderr, "framework: %.0f s of wall time, %.0f CPU-s: %.0f in the tests, %.0f in the control plane and the processes they ran\n",
		time.Since(start).Seconds(), sec(self)+sec(children), sec(self), sec(children))
}

// GOMAXPROCSEnv, set to a positive number, is the GOMAXPROCS of the control
// planes' components (localcluster.Config.GOMAXPROCS); make test sets 1
// (hack/test.sh). Unset, they use every core, as the demo's do.
const GOMAXPROCSEnv = "LOCALCLUSTER_GOMAXPROCS"

// controlPlaneConfig is what every control plane of the tests starts with:
// the repository's binaries and kwok stages, a new directory under
// _output, and the components' GOGC and GOMAXPROCS.
func controlPlaneConfig() (localcluster.Config, error) {
	root, err := RepoRoot()
	if err != nil {
		return localcluster.Config{}, err
	}
	gomaxprocs, err := controlPlaneGOMAXPROCS()
	if err != nil {
		return localcluster.Config{}, err
	}
	dir, err := os.MkdirTemp(filepath.Join(root, "_output"), "test-cluster-")
	if err != nil {
		return localcluster.Config{}, err
	}
	return localcluster.Config{BinDir: filepath.Join(root, "_output", "bin"),
		StagesDir: filepath.Join(root, "_output", "kwok-stages"), Dir: dir, GOGC: controlPlaneGOGC,
		GOMAXPROCS: gomaxprocs}, nil
}

// controlPlaneGOMAXPROCS reads GOMAXPROCSEnv: 0 when unset, an error when
// it is not a positive number.
func controlPlaneGOMAXPROCS() (int, error) {
	v := os.Getenv(GOMAXPROCSEnv)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%s=%q: want a positive number of processors", GOMAXPROCSEnv, v)
	}
	return n, nil
}

// controlPlaneGOGC is the GOGC of the test control planes' components: their
// collections were about a tenth of kube-apiserver's CPU, and memory is
// plentiful next to the two cores the whole of make test shares.
const controlPlaneGOGC = 400
