package dra

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// TestDRAProvisioningRequestWithClaims: an atomic ProvisioningRequest for
// a 4-pod job whose PodTemplate gives each pod a GPU claim (claim template)
// gets exactly the 2 nodes of the GPU group (2 devices each; the plain
// group has room for every pod's CPU but no device) and is Provisioned; a
// check-capacity request for one more such pod then finds no capacity:
// the job's booking holds all 4 devices, though the CPUs are free. The
// job's pods (consume annotation, the same claims) run on the new nodes
// with their claims allocated, the booking ends as consumed, and no node
// is added.
func TestDRAProvisioningRequestWithClaims(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	gpu, plain, driver, path := itest.DraGroups(e.Env, 2)
	itest.CreateClaimTemplate(e.Env, "one-gpu", driver, 1)

	e.ClaimRequest("job", provreq.ClassBestEffortAtomicScaleUp, "one-gpu", 4)
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path, "--expander=least-waste")...)
	job := e.Condition("job", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 120*time.Second)
	if got := string(job.Status.ProvisioningClassDetails["nodeGroups"]); got != gpu {
		t.Errorf("job's nodeGroups detail = %q, want %q", got, gpu)
	}
	if got := itest.NodesPerPool(e.Env); got[gpu] != 2 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want %s:2 and no %s node", got, gpu, plain)
	}

	// The job's booking holds every device: one more GPU pod does not fit.
	e.ClaimRequest("probe", provreq.ClassCheckCapacity, "one-gpu", 1)
	e.Condition("probe", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 60*time.Second)

	// The job's pods arrive, as Kueue would create them.
	e.CreateConsumers("job", "one-gpu", 4)
	waitRunningWithClaims(e.Env, 4, 120*time.Second, "the job's 4 pods Running with their claims allocated")
	pods, err := e.Client.CoreV1().Pods(e.Namespace).List(e.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		node, err := e.Client.CoreV1().Nodes().Get(e.Context(), p.Spec.NodeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if node.Labels["pool"] != gpu {
			t.Errorf("pod %s runs on %s of pool %q, want a node of %s", p.Name, node.Name, node.Labels["pool"], gpu)
		}
	}
	e.Condition("job", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, 60*time.Second)
	if got := itest.NodesPerPool(e.Env); got[gpu] != 2 || got[plain] != 0 {
		t.Errorf("nodes per group after the job ran = %v, want no more", got)
	}
}

// TestDRAProvisioningRequestRefusalNamesTheDeviceClass: the pods of two
// requests each claim 8 devices on one node; the one GPU node publishes 2,
// and the groups' nodes offer 2 or none. The check-capacity request is
// Provisioned=False (CapacityIsNotFound, upstream's reason) with a message
// saying no node offers 8 devices of the class; the atomic one is
// Failed (CapacityCanNeverFit) saying no node group offers them on one
// node, as the pods' NotTriggerScaleUp events word it. No node is added.
func TestDRAProvisioningRequestRefusalNamesTheDeviceClass(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	gpu, plain, driver, path := itest.DraGroups(e.Env, 2)
	gpuGroupNode(e.Env, gpu, gpu+"-first", driver, 2)
	itest.CreateClaimTemplate(e.Env, "eight", driver, 8)

	e.ClaimRequest("check", provreq.ClassCheckCapacity, "eight", 1)
	e.ClaimRequest("atomic", provreq.ClassBestEffortAtomicScaleUp, "eight", 1)
	itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path, "--expander=least-waste")...)

	check := e.Condition("check", provreq.ConditionProvisioned, metav1.ConditionFalse, provreq.ReasonCapacityIsNotFound, 60*time.Second)
	if msg, want := e.ConditionMessage(check, provreq.ConditionProvisioned),
		"do not all fit the cluster's current nodes: no node offers 8 devices of class "+driver+"; next check at"; !strings.Contains(msg, want) {
		t.Errorf("check's message %q, want it to contain %q", msg, want)
	}
	atomic := e.Condition("atomic", provreq.ConditionFailed, metav1.ConditionTrue, processor.ReasonCapacityCanNeverFit, 60*time.Second)
	if msg, want := e.ConditionMessage(atomic, provreq.ConditionFailed),
		"none of the 1 pods fit: no node group offers 8 devices of class "+driver+" on one node"; !strings.Contains(msg, want) {
		t.Errorf("atomic's message %q, want it to contain %q", msg, want)
	}
	if got := itest.NodesPerPool(e.Env); got[gpu] != 1 || got[plain] != 0 {
		t.Errorf("nodes per group = %v, want the first %s node only", got, gpu)
	}
}

// TestDRAAtomicRequestAcrossDeviceGroups: an atomic request for 8 pods
// with a one-GPU claim each needs 4 nodes of 2 devices, and each of the
// three device groups holds at most 2: the request is split over two
// groups (the atomic scale-up fills groups in the expander's order when
// none holds all). The preferred pair (a, then b) fails: b's cloud has
// room for one instance, so b's increase fails and a's new instances are
// deleted at once. The next try, with b backed off, takes a and c, and
// the request is Provisioned on them; the consuming pods run there with
// their claims allocated. No node or instance of the failed attempt is
// left: a has its 2 nodes, b none, c 2, and the provider holds no
// instance without a Node.
func TestDRAAtomicRequestAcrossDeviceGroups(t *testing.T) {
	e := itest.NewProvreqEnv(t)
	e.DumpRequests()
	itest.DumpPods(e.Env)
	a, b, c := framework.UniqueName("dra-a"), framework.UniqueName("dra-b"), framework.UniqueName("dra-c")
	driver := a + ".example.com"
	group := func(name, faults string) itest.KwokGroup {
		g := devicesGroup(name, driver, 2)
		g.MaxSize, g.Faults = 2, faults
		return g
	}
	path := itest.WriteKwokGroups(e.Env, group(a, "{registrationDelay: 1s}"),
		group(b, "{registrationDelay: 1s, outOfCapacityAfter: 1}"), group(c, "{registrationDelay: 1s}"))
	itest.CreateDeviceClass(e.Env, driver, driver)
	if _, err := e.Client.CoreV1().ConfigMaps(e.Namespace).Create(e.Context(),
		itest.PriorityConfigMap(e.Env, fmt.Sprintf("30:\n  - ^%s$\n20:\n  - ^%s$\n10:\n  - .*\n", a, b)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	itest.CreateClaimTemplate(e.Env, "one-gpu", driver, 1)
	e.ClaimRequest("job", provreq.ClassBestEffortAtomicScaleUp, "one-gpu", 8)
	p := itest.StartAutoscaler(t, "autoscaler", itest.ProvreqArgs(e, path)...)

	job := e.Condition("job", provreq.ConditionProvisioned, metav1.ConditionTrue, provreq.ReasonCapacityIsProvisioned, 180*time.Second)
	if !p.Log.Written("a later increase of the same request failed") || !p.Log.Written("Deleted instance of a rolled back all-or-nothing scale-up") {
		t.Error("the log shows no rolled back attempt before the one that was provisioned")
	}
	groups := strings.Split(string(job.Status.ProvisioningClassDetails[processor.DetailNodeGroups]), ",")
	slices.Sort(groups)
	if want := []string{a, c}; !slices.Equal(groups, want) {
		t.Errorf("job's nodeGroups detail = %v, want %v", groups, want)
	}

	// The job's pods arrive, as Kueue would create them.
	e.CreateConsumers("job", "one-gpu", 8)
	waitRunningWithClaims(e.Env, 8, 120*time.Second, "the job's 8 pods Running with their claims allocated")
	e.Condition("job", provreq.ConditionBookingExpired, metav1.ConditionTrue, provreq.ReasonCapacityBookingConsumed, 60*time.Second)
	// Several more loops (scan interval 1s): nothing of the failed
	// attempt reappears, nothing more is added.
	time.Sleep(4 * time.Second)
	if got := itest.NodesPerPool(e.Env); got[a] != 2 || got[b] != 0 || got[c] != 2 {
		t.Errorf("nodes per group = %v, want %s:2 %s:0 %s:2", got, a, b, c)
	}
	if pending := itest.PendingInstances(e.Env, []string{a, b, c}); len(pending) != 0 {
		t.Errorf("the kwok provider holds instances without a Node: %v, want none (nothing of the failed attempt left)", pending)
	}
	for node, n := range podNodes(e.Env) {
		if !strings.HasPrefix(n, a+"-") && !strings.HasPrefix(n, c+"-") {
			t.Errorf("pod %s runs on %q, want a node of %s or %s", node, n, a, c)
		}
	}
}
