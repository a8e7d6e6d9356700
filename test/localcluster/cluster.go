package localcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config says where the binaries are and where the cluster keeps its files.
type Config struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.
	BinDir string
	// StagesDir holds kwok's stage definitions (hack/build-tools.sh copies them).
	StagesDir string
	// Dir receives certificates, data, logs and the state file; it is created.
	Dir string
	// Detach leaves the processes running after this process exits (hack/local-up.sh).
	// Otherwise they are killed with this process.
	Detach bool
	// NodeLeaseSeconds is kwok's node lease duration; 40 suits up to ~1000 nodes.
	NodeLeaseSeconds int
	// KwokParallelism, when positive, is how many pod and node stages and
	// node leases kwok works on at once (kwok's default is 4 each): raise it
	// for tens of thousands of pods.
	KwokParallelism int
	// KwokIgnorePodLabel, when set, is a label key that makes kwok leave a
	// pod's status alone (its pod-ready stage skips pods carrying it), for
	// a test that writes the status of many pods itself.
	KwokIgnorePodLabel string
	// GOGC, when positive, is the components' GOGC: the test framework
	// trades their memory for CPU (at 400 the control plane of a test
	// package used about 8% less CPU; docs/test-times.md).
	GOGC int
	// GOMAXPROCS, when positive, is the components' GOMAXPROCS. make test
	// sets 1 (hack/test.sh, through the framework): with a dozen
	// components of five control planes sharing two cores, each runtime's
	// spare processors only spin and collect in parallel; at 1 a package's
	// control plane used about a fifth less CPU (docs/test-times.md).
	GOMAXPROCS int
}

// env is the components' environment: this process's, with GOGC and
// GOMAXPROCS when cfg sets them (nil: inherited as is).
func (cfg Config) env() []string {
	var extra []string
	if cfg.GOGC > 0 {
		extra = append(extra, fmt.Sprintf("GOGC=%d", cfg.GOGC))
	}
	if cfg.GOMAXPROCS > 0 {
		extra = append(extra, fmt.Sprintf("GOMAXPROCS=%d", cfg.GOMAXPROCS))
	}
	if len(extra) == 0 {
		return nil
	}
	return append(os.Environ(), extra...)
}

// State is what a running cluster records in Dir/state.json.
type State struct {
	Kubeconfig string         `json:"kubeconfig"`
	Server     string         `json:"server"`
	Token      string         `json:"token"`
	PIDs       map[string]int `json:"pids"`
	Ports      map[string]int `json:"ports"`
}

// Cluster is a running local control plane.
type Cluster struct {
	State
	dir   string
	procs []*process
	ca    []byte
	// cfg, pki and tokenFile restart a component with its arguments; set
	// only in the process that started the cluster.
	cfg       Config
	pki       *pki
	tokenFile string

	// restarting is set while RestartAPIServer has the API server down
	// on purpose (Exited does not report it then).
	mu         sync.Mutex
	restarting bool
}

const stateFile = "state.json"

// components in start order; Stop goes in reverse.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// Start brings a control plane up and returns once every component is healthy.
// The free ports are found by listening and closing, so another process may
// take one before its component binds it (several packages start clusters at
// once): a start that failed on a port already in use is tried again, with
// new ports, up to three times in all.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	for attempt := 1; ; attempt++ {
		c, err := startOnce(ctx, cfg)
		if err == nil || attempt == 3 || ctx.Err() != nil || !portTaken(cfg.Dir) {
			return c, err
		}
		fmt.Fprintf(os.Stderr, "localcluster: a port was taken before its component bound it (%v); starting again with new ports\n", err)
		logs := filepath.Join(cfg.Dir, "logs")
		if rerr := os.Rename(logs, fmt.Sprintf("%s-attempt-%d", logs, attempt)); rerr != nil {
			return nil, fmt.Errorf("%w (and keeping its logs: %v)", err, rerr)
		}
	}
}

// portTaken reports whether a component's log in dir says a port it was
// given was already in use.
func portTaken(dir string) bool {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil && bytes.Contains(b, []byte("address already in use")) {
			return true
		}
	}
	return false
}

func startOnce(ctx context.Context, cfg Config) (c *Cluster, err error) {
	if cfg.NodeLeaseSeconds == 0 {
		cfg.NodeLeaseSeconds = 40
	}
	for _, b := range components {
		if _, err := os.Stat(filepath.Join(cfg.BinDir, b)); err != nil {
			return nil, fmt.Errorf("control-plane binary %s missing in %s (run hack/build-tools.sh): %w", b, cfg.BinDir, err)
		}
	}
	// A new cluster starts empty: data of an earlier one in Dir is discarded.
	if err := os.RemoveAll(filepath.Join(cfg.Dir, "etcd")); err != nil {
		return nil, err
	}
	for _, sub := range []string{"pki", "etcd", "logs"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, sub), 0o755); err != nil {
			return nil, err
		}
	}
	p, err := writePKI(filepath.Join(cfg.Dir, "pki"))
	if err != nil {
		return nil, fmt.Errorf("writing certificates: %w", err)
	}
	ports, err := freePorts("etcd", "etcd-peer", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")
	if err != nil {
		return nil, err
	}
	token := randomToken()
	tokenFile := filepath.Join(cfg.Dir, "pki", "tokens.csv")
	c = &Cluster{dir: cfg.Dir, ca: p.caPEM, cfg: cfg, pki: p, tokenFile: tokenFile, State: State{
		Server: fmt.Sprintf("https://127.0.0.1:%d", ports["kube-apiserver"]),
		Token:  token, PIDs: map[string]int{}, Ports: ports,
		Kubeconfig: filepath.Join(cfg.Dir, "kubeconfig"),
	}}
	// Processes already started are stopped if a later step fails; the
	// returns below set c to nil, so the deferred stop holds its own copy.
	started := c
	defer func() {
		if err != nil {
			_ = started.Stop()
		}
	}()
	if err := os.WriteFile(tokenFile, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return nil, err
	}
	if err := c.writeKubeconfig(); err != nil {
		return nil, err
	}
	kwokConfig, err := writeKwokConfiguration(cfg)
	if err != nil {
		return nil, err
	}
	kwokStages, err := kwokStagePaths(cfg)
	if err != nil {
		return nil, err
	}

	steps := []struct {
		name    string
		args    []string
		healthy func(context.Context) error
	}{
		{"etcd", etcdArgs(cfg, ports), func(ctx context.Context) error {
			return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/health", ports["etcd"]), "")
		}},
		{"kube-apiserver", apiserverArgs(cfg, ports, p, tokenFile), c.apiserverReady},
		{"kube-controller-manager", controllerManagerArgs(cfg, ports, p, c.Kubeconfig), func(ctx context.Context) error {
			return httpOK(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports["kube-controller-manager"]), "")
		}},
		{"kube-scheduler", schedulerArgs(ports, c.Kubeconfig), func(ctx context.Context) error {
			return httpOK(ctx, fmt.Sprintf("https://127.0.0.1:%d/healthz", ports["kube-scheduler"]), "")
		}},
		{"kwok", kwokArgs(cfg, ports, c.Kubeconfig, append(kwokStages, kwokConfig)), func(ctx context.Context) error {
			return httpOK(ctx, fmt.Sprintf("http://127.0.0.1:%d/healthz", ports["kwok"]), "")
		}},
	}
	for _, s := range steps {
		proc, err := startProcess(filepath.Join(cfg.BinDir, s.name), s.args,
			filepath.Join(cfg.Dir, "logs", s.name+".log"), cfg.Detach, cfg.env())
		if err != nil {
			return nil, fmt.Errorf("starting %s: %w", s.name, err)
		}
		c.procs = append(c.procs, proc)
		c.PIDs[s.name] = proc.pid()
		if err := c.saveState(); err != nil {
			return nil, err
		}
		if err := waitHealthy(ctx, s.name, proc, s.healthy); err != nil {
			return nil, fmt.Errorf("%w (log: %s)", err, filepath.Join(cfg.Dir, "logs", s.name+".log"))
		}
	}
	return c, nil
}

func (c *Cluster) apiserverReady(ctx context.Context) error {
	return httpOK(ctx, c.Server+"/readyz", c.Token)
}

// RestartAPIServer kills kube-apiserver with SIGKILL, as a crash would,
// leaves it down for downtime and starts it again with the same port,
// certificates, token and etcd data; it returns once /readyz answers. The
// other components stay up and reconnect by themselves. Only the process
// that started the cluster can restart its API server.
func (c *Cluster) RestartAPIServer(ctx context.Context, downtime time.Duration) error {
	const name = "kube-apiserver"
	if c.pki == nil {
		return errors.New("restarting kube-apiserver: the cluster was started by another process")
	}
	i := slices.IndexFunc(c.procs, func(p *process) bool { return p.pid() == c.PIDs[name] })
	if i < 0 {
		return errors.New("restarting kube-apiserver: it is not running")
	}
	c.mu.Lock()
	c.restarting = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.restarting = false
		c.mu.Unlock()
	}()
	if err := syscall.Kill(c.procs[i].pid(), syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("killing kube-apiserver: %w", err)
	}
	select {
	case <-c.procs[i].done:
	case <-time.After(10 * time.Second):
		return errors.New("kube-apiserver still running 10s after SIGKILL")
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(downtime):
	}
	logPath := filepath.Join(c.cfg.Dir, "logs", name+".log")
	proc, err := startProcess(filepath.Join(c.cfg.BinDir, name), apiserverArgs(c.cfg, c.Ports, c.pki, c.tokenFile),
		logPath, c.cfg.Detach, c.cfg.env())
	if err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	c.mu.Lock()
	c.procs[i] = proc
	c.PIDs[name] = proc.pid()
	c.mu.Unlock()
	if err := c.saveState(); err != nil {
		return err
	}
	if err := waitHealthy(ctx, name, proc, c.apiserverReady); err != nil {
		return fmt.Errorf("%w (log: %s)", err, logPath)
	}
	return nil
}

// Attach reads the state of a cluster started by another process.
func Attach(dir string) (*Cluster, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("reading cluster state: %w", err)
	}
	c := &Cluster{dir: dir}
	if err := json.Unmarshal(data, &c.State); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", filepath.Join(dir, stateFile), err)
	}
	return c, nil
}

// RESTConfig returns an admin client configuration for the cluster.
func (c *Cluster) RESTConfig() (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg, nil
}

// Stop terminates the processes this cluster recorded, newest first, and
// waits for them; a process that ignores SIGTERM for 10 s is killed.
func (c *Cluster) Stop() error {
	var errs []error
	c.reportCPU()
	c.reportRequests()
	for i := len(components) - 1; i >= 0; i-- {
		name := components[i]
		pid, ok := c.PIDs[name]
		if !ok {
			continue
		}
		var proc *process
		for _, p := range c.procs {
			if p.pid() == pid {
				proc = p
			}
		}
		if err := stopPID(pid, name, proc, 10*time.Second); err != nil {
			errs = append(errs, fmt.Errorf("stopping %s (pid %d): %w", name, pid, err))
		}
		delete(c.PIDs, name)
	}
	if c.dir != "" {
		_ = os.Remove(filepath.Join(c.dir, stateFile))
	}
	return errors.Join(errs...)
}

func (c *Cluster) saveState() error {
	data, err := json.MarshalIndent(c.State, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.dir, stateFile), data, 0o600)
}

func (c *Cluster) writeKubeconfig() error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: admin
  user:
    token: %s
contexts:
- name: local
  context: {cluster: local, user: admin}
current-context: local
`, c.Server, filepath.Join(c.dir, "pki", "ca.crt"), c.Token)
	return os.WriteFile(c.Kubeconfig, []byte(cfg), 0o600)
}

func freePorts(names ...string) (map[string]int, error) {
	ports := map[string]int{}
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for _, n := range names {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("finding a free loopback port: %w", err)
		}
		listeners = append(listeners, l)
		ports[n] = l.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// waitHealthy polls healthy until it passes, the process exits, or 90 s pass.
func waitHealthy(ctx context.Context, name string, proc *process, healthy func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	var last error
	for {
		if exited, err := proc.exited(); exited {
			return fmt.Errorf("%s exited before becoming healthy: %v", name, err)
		}
		if last = healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy after 90s: %v", name, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

var probeClient = &http.Client{
	Timeout: 2 * time.Second,
	// The probes go to this cluster's own loopback components, whose serving
	// certificates are self-signed at start.
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health probes only
}

func httpOK(ctx context.Context, url, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %d", url, resp.StatusCode)
	}
	return nil
}

// Exited describes the components this process started that have ended
// since (but an API server RestartAPIServer has down on purpose): each one's
// exit status and the last lines of its log; "" while all of them run. A
// test package's tests call it to fail at once, saying why, rather than
// wait out their timeouts on a control plane that lost a component.
func (c *Cluster) Exited() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, name := range components {
		i := slices.IndexFunc(c.procs, func(p *process) bool { return p.pid() == c.PIDs[name] })
		if i < 0 || (name == "kube-apiserver" && c.restarting) {
			continue
		}
		if done, err := c.procs[i].exited(); done {
			fmt.Fprintf(&b, "%s exited (%v); the end of its log:\n%s\n", name, err, c.LogTail(name, 4096))
		}
	}
	return b.String()
}

// LogTail is the last n bytes of component name's log (a cluster this
// process started), or why it cannot be read.
func (c *Cluster) LogTail(name string, n int64) string {
	return logTail(filepath.Join(c.cfg.Dir, "logs", name+".log"), n)
}

// logTail is the last n bytes of the file at path, or why it cannot be read.
func logTail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err == nil && info.Size() > n {
		_, _ = f.Seek(info.Size()-n, 0)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Running reports whether every recorded component still runs.
func (c *Cluster) Running() bool {
	for _, name := range components {
		pid, ok := c.PIDs[name]
		if !ok || !runs(pid, name) {
			return false
		}
	}
	return true
}

// reportCPU prints, on standard error, the CPU time each component of a
// cluster this process started has used (docs/test-times.md: which part of
// a test package's time is the control plane, and which component).
func (c *Cluster) reportCPU() {
	if len(c.procs) == 0 {
		return
	}
	var parts []string
	total := 0.0
	for _, name := range components {
		pid, ok := c.PIDs[name]
		if !ok {
			continue
		}
		if sec, err := cpuSeconds(pid); err == nil {
			parts = append(parts, fmt.Sprintf("%s %.0f", name, sec))
			total += sec
		}
	}
	fmt.Fprintf(os.Stderr, "localcluster: %.0f CPU-s in the control plane (%s)\n", total, strings.Join(parts, ", "))
}

// cpuSeconds is the user and system time process pid has used, from
// /proc/<pid>/stat (Linux).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command's name (in parentheses, may hold spaces).
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("unexpected /proc/%d/stat", pid)
	}
	return (utime + stime) / clockTicks, nil
}

// clockTicks is USER_HZ, 100 on every Linux the project runs on.
const clockTicks = 100
