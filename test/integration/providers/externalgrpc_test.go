package providers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// buildKwokServer builds the example externalgrpc server (the kwok provider
// served over the protocol) into the test's temporary directory.
func buildKwokServer(t *testing.T) string {
	t.Helper()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "kwokserver")
	if err := framework.GoBuild(root, bin, "./cloudprovider/externalgrpc/examples/kwokserver", false); err != nil {
		t.Fatal(err)
	}
	return bin
}

// startKwokServer runs the example server on a free loopback address (the
// process's address) with the kwok config at kwokConfig.
func startKwokServer(e *framework.Env, bin, name, address, kwokConfig string, extra ...string) *itest.AutoscalerProcess {
	e.T.Helper()
	args := append([]string{"--kubeconfig=" + e.Kubeconfig, "--kwok-config=" + kwokConfig, "--namespace=" + e.Namespace}, extra...)
	if address != "" {
		args = append(args, "--address="+address)
	}
	p := itest.StartServerBinary(e.T, bin, name, args...)
	if address != "" {
		p.Address = address
	}
	waitListening(e, p.Address)
	return p
}

func waitListening(e *framework.Env, address string) {
	e.T.Helper()
	e.Eventually(30*time.Second, "the externalgrpc server listening on "+address, func(ctx context.Context) (bool, error) {
		c, err := net.DialTimeout("tcp", address, time.Second)
		if err != nil {
			return false, nil
		}
		_ = c.Close()
		return true, nil
	})
}

// externalGRPCArgs are the autoscaler's arguments for the externalgrpc
// provider whose --cloud-config is cloudConfig.
func externalGRPCArgs(e *framework.Env, cloudConfig string, extra ...string) []string {
	path := filepath.Join(e.T.TempDir(), "externalgrpc.yaml")
	if err := os.WriteFile(path, []byte(cloudConfig), 0o600); err != nil {
		e.T.Fatal(err)
	}
	args := []string{"--kubeconfig=" + e.Kubeconfig, "--namespace=" + e.Namespace, "--cloud-provider=externalgrpc",
		"--cloud-config=" + path, "--scan-interval=1s", "--v=4"}
	return append(args, extra...)
}

// TestExternalGRPCPlaintextScaleUp: the real binary, talking plaintext to
// the example server, scales the kwok groups up for pending pods, which run.
func TestExternalGRPCPlaintextScaleUp(t *testing.T) {
	e := framework.New(t)
	bin := buildKwokServer(t)
	path, small, large := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	srv := startKwokServer(e, bin, "kwokserver", "", path)
	itest.Deployment(e, "web", 6, map[string]string{"pool": small}) // a pending Deployment: 2 small nodes
	itest.CreatePods(e, "batch", 1, "8", map[string]string{"pool": large})

	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e, fmt.Sprintf("address: %s\ngrpc_timeout: 2s\n", srv.Address))...)
	e.Eventually(60*time.Second, "all 7 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 7)
	})
	if got := itest.NodesPerPool(e); got[small] != 2 || got[large] != 1 {
		t.Errorf("nodes per group = %v, want %s:2 %s:1", got, small, large)
	}
	if !p.Log.Written("NOT encrypted") {
		t.Error("no warning about the plaintext connection logged")
	}
}

// TestExternalGRPCMutualTLS: with a CA, a server and a client certificate
// made here, the binary talks mTLS to the example server and scales up.
func TestExternalGRPCMutualTLS(t *testing.T) {
	e := framework.New(t)
	bin := buildKwokServer(t)
	path, small, _ := itest.ScaleUpConfig(e)
	pki := newTestPKI(t)
	srv := startKwokServer(e, bin, "kwokserver", "", path,
		"--key="+pki.serverKey, "--cert="+pki.serverCert, "--cacert="+pki.ca)
	itest.CreatePods(e, "web", 3, "1", map[string]string{"pool": small})
	cfg := fmt.Sprintf("address: %s\nkey: %s\ncert: %s\ncacert: %s\n", srv.Address, pki.clientKey, pki.clientCert, pki.ca)
	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e, cfg)...)
	e.Eventually(60*time.Second, "all 3 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 3)
	})
	if got := itest.NodesPerPool(e); got[small] != 1 {
		t.Errorf("nodes per group = %v, want %s:1", got, small)
	}
	if p.Log.Contains("NOT encrypted") {
		t.Error("the mTLS connection was reported as plaintext")
	}

	// A client without a certificate is refused: the plaintext binary's
	// loops fail with a cloud-provider error.
	if code := p.Terminate(30 * time.Second); code != 0 {
		t.Errorf("the mTLS autoscaler exited with %d", code)
	}
	plain := itest.StartAutoscaler(t, "plaintext-autoscaler", externalGRPCArgs(e, "address: "+srv.Address+"\n")...)
	e.Eventually(30*time.Second, "the plaintext client's loops fail", func(context.Context) (bool, error) {
		return plain.Log.Contains(`"Loop failed"`) && plain.Log.Contains("cloudProviderError"), nil
	})
}

// TestExternalGRPCServerRestart: while the server is down the loops report
// a cloud-provider error and nothing is deleted; once it is back, scaling
// works again.
func TestExternalGRPCServerRestart(t *testing.T) {
	e := framework.New(t)
	bin := buildKwokServer(t)
	path, small, _ := itest.ScaleUpConfig(e)
	itest.DumpPods(e)
	// Started again on the same address below.
	address := framework.FreeRestartAddress(t)
	srv := startKwokServer(e, bin, "kwokserver", address, path)
	itest.CreatePods(e, "web", 3, "1", map[string]string{"pool": small})
	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e, "address: "+address+"\ngrpc_timeout: 1s\n",
		"--scale-down-unneeded-time=1s", "--scale-down-delay-after-add=0s")...)
	e.Eventually(60*time.Second, "all 3 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 3)
	})

	if err := srv.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	srv.WaitExit(10 * time.Second)
	before := itest.NodesPerPool(e)[small]
	// Deleting the pods makes the nodes unneeded: with the server down
	// they must stay; new pending pods must wait.
	if err := e.Client.CoreV1().Pods(e.Namespace).DeleteCollection(e.Context(), metav1.DeleteOptions{GracePeriodSeconds: new(int64)},
		metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.CreatePods(e, "late", 2, "3", map[string]string{"pool": small})
	mark := len(p.Log.String())
	e.Eventually(30*time.Second, "loops failing with a cloud-provider error", func(context.Context) (bool, error) {
		tail := p.Log.String()[mark:]
		return strings.Count(tail, `"Loop failed"`) >= 3 && strings.Contains(tail, "cloudProviderError"), nil
	})
	if got := itest.NodesPerPool(e)[small]; got != before {
		t.Fatalf("nodes of %s changed from %d to %d while the server was down", small, before, got)
	}
	_, body, _ := p.Get(e.Context(), "/metrics")
	if !strings.Contains(body, `cluster_autoscaler_errors_total{type="cloudProviderError"}`) {
		t.Error("/metrics lacks cloudProviderError errors")
	}

	startKwokServer(e, bin, "kwokserver-restarted", address, path)
	e.Eventually(90*time.Second, "the 2 late pods Running after the restart", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 2)
	})
}

// TestExternalGRPCRemovesUnneededNodesByName: of a group's three nodes, the
// one with a pod stays and the two empty ones are deleted by name through the
// protocol (the group's minimum of 1 is kept either way).
func TestExternalGRPCRemovesUnneededNodesByName(t *testing.T) {
	e := framework.New(t)
	bin := buildKwokServer(t)
	group := framework.UniqueName("sd")
	path := itest.GroupsConfig(e, group+":1")
	itest.DumpPods(e)
	for _, n := range []string{"a", "b", "c"} {
		itest.GroupNode(e, group, group+"-"+n, nil)
	}
	itest.ReplicaSet(e, "web", group, 1, "3", false)
	e.Eventually(30*time.Second, "the web pod Running", func(ctx context.Context) (bool, error) {
		running, _, err := itest.PodsOf(ctx, e, "web")
		return err == nil && running == 1, err
	})
	_, nodes, err := itest.PodsOf(e.Context(), e, "web")
	if err != nil {
		t.Fatal(err)
	}
	srv := startKwokServer(e, bin, "kwokserver", "", path)
	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e, "address: "+srv.Address+"\n",
		"--scale-down-unneeded-time=2s", "--scale-down-delay-after-add=0s", "--node-delete-delay-after-taint=1s")...)
	// The log line follows the deletion: wait for both.
	e.Eventually(60*time.Second, "only the web pod's node left, the others' removal logged by name", func(context.Context) (bool, error) {
		left := itest.NodeNames(e, group)
		if len(left) != 1 || nodes[left[0]] != 1 {
			return false, nil
		}
		for _, n := range []string{"a", "b", "c"} {
			name := group + "-" + n
			if nodes[name] == 0 && !logLine(p.Log.String(), `"Scaled down an empty node"`, `node="`+name+`"`) {
				return false, nil
			}
		}
		return true, nil
	})
}

// TestExternalGRPCAtomicProvisioningRequest: the protocol has no atomic
// increase, so an all-or-nothing request is served by IncreaseSize; it is
// provisioned, and its pods run on the new nodes.
func TestExternalGRPCAtomicProvisioningRequest(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	bin := buildKwokServer(t)
	path, small, _ := itest.ScaleUpConfig(e.Env)
	srv := startKwokServer(e.Env, bin, "kwokserver", "", path)
	e.Request("gang", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 6, CPU: "2", Selector: map[string]string{"pool": small}})
	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e.Env, "address: "+srv.Address+"\n",
		"--enable-provisioning-requests", "--provisioning-request-initial-backoff-time=2s",
		"--provisioning-request-max-backoff-time=4s")...)
	e.Condition("gang", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 60*time.Second)
	if got := itest.NodesPerPool(e.Env); got[small] != 3 {
		t.Errorf("nodes per group = %v, want %s:3", got, small)
	}
	if !p.Log.Written("Scaled up for a ProvisioningRequest") {
		t.Error("no atomic scale-up logged")
	}
	e.Consumers("gang", 6, "2", map[string]string{"pool": small})
	e.Eventually(60*time.Second, "all 6 consuming pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e.Env, 6)
	})
}

// TestExternalGRPCAtomicRollback: a request split over two groups, the
// second out of capacity: the increases succeed over the protocol, the
// second group reports a failed (out-of-resources) instance, and every
// instance of the attempt is deleted through the protocol.
func TestExternalGRPCAtomicRollback(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	bin := buildKwokServer(t)
	ok, stockout, shape := framework.UniqueName("ok"), framework.UniqueName("stockout"), framework.UniqueName("shape")
	path := itest.WriteKwokConfig(e.Env, fmt.Sprintf(`
nodeGroups:
- name: %[1]s
  maxSize: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[1]s, shape: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s}
- name: %[2]s
  maxSize: 2
  template:
    labels: {%[3]s: %[4]s, pool: %[2]s, shape: %[5]s}
    capacity: {cpu: "4", memory: 16Gi, pods: "110"}
  faults: {registrationDelay: 1s, outOfCapacityAfter: 1}
`, ok, stockout, framework.TestNamespaceLabel, e.Namespace, shape))
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e.Env, fmt.Sprintf("20:\n  - ^%s$\n10:\n  - .*\n", ok)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	srv := startKwokServer(e.Env, bin, "kwokserver", "", path)
	e.Request("split", provreq.ClassBestEffortAtomicScaleUp, nil, false,
		itest.PodSet{Name: "main", Count: 16, CPU: "1", Selector: map[string]string{"shape": shape}})
	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e.Env, "address: "+srv.Address+"\n",
		"--enable-provisioning-requests", "--provisioning-request-initial-backoff-time=2s",
		"--provisioning-request-max-backoff-time=4s", "--expander=priority")...)
	e.Condition("split", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 60*time.Second)
	e.Eventually(30*time.Second, "the rolled back instances deleted by name", func(context.Context) (bool, error) {
		return p.Log.Contains("Deleted instance of a rolled back all-or-nothing scale-up"), nil
	})
	e.Eventually(30*time.Second, "no node of the attempt left", func(context.Context) (bool, error) {
		got := itest.NodesPerPool(e.Env)
		return got[ok] == 0 && got[stockout] == 0, nil
	})
}

// TestExternalGRPCOutOfCapacityBacksOff: the preferred group's instances
// beyond the first fail with an out-of-resources error class; reported over
// the protocol, they back the group off at once and the pods go to the
// fallback group.
func TestExternalGRPCOutOfCapacityBacksOff(t *testing.T) {
	e := framework.New(t)
	bin := buildKwokServer(t)
	path, preferred, fallback := itest.OutOfCapacityGroups(e)
	itest.DumpPods(e)
	srv := startKwokServer(e, bin, "kwokserver", "", path)
	itest.CreatePods(e, "web", 8, "1", map[string]string{"shape": "standard"}) // two 4-CPU nodes
	p := itest.StartAutoscaler(t, "autoscaler", externalGRPCArgs(e, "address: "+srv.Address+"\n", "--expander=priority")...)
	e.Eventually(60*time.Second, "all 8 pods Running", func(ctx context.Context) (bool, error) {
		return itest.AllRunning(ctx, e, 8)
	})
	if got := itest.NodesPerPool(e); got[preferred] != 1 || got[fallback] < 1 {
		t.Errorf("nodes per group = %v, want 1 in %s (its capacity) and the rest in %s", got, preferred, fallback)
	}
	if !logLine(p.Log.String(), `"Node group backed off"`, `errorCode="STOCKOUT"`) {
		t.Error("the back-off is not logged with the STOCKOUT error code")
	}
}

// logLine reports whether a line of log holds every part.
func logLine(log string, parts ...string) bool {
	for _, line := range strings.Split(log, "\n") {
		all := true
		for _, part := range parts {
			all = all && strings.Contains(line, part)
		}
		if all {
			return true
		}
	}
	return false
}

// testPKI is a CA with a server certificate for 127.0.0.1 and a client certificate.
type testPKI struct {
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	caKey := newKey(t)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	issue := func(serial int64, cn string, usage x509.ExtKeyUsage, ips []net.IP) (certPath, keyPath string) {
		key := newKey(t)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage}, IPAddresses: ips}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certPath, keyPath = filepath.Join(dir, cn+".crt"), filepath.Join(dir, cn+".key")
		writePEM(t, certPath, "CERTIFICATE", der)
		writePEM(t, keyPath, "EC PRIVATE KEY", keyDER)
		return certPath, keyPath
	}
	p := testPKI{ca: filepath.Join(dir, "ca.crt")}
	writePEM(t, p.ca, "CERTIFICATE", caDER)
	p.serverCert, p.serverKey = issue(2, "server", x509.ExtKeyUsageServerAuth, []net.IP{net.ParseIP("127.0.0.1")})
	p.clientCert, p.clientKey = issue(3, "client", x509.ExtKeyUsageClientAuth, nil)
	return p
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func writePEM(t *testing.T, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
