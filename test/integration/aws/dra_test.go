package aws

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	apiv1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsprovider "k8s.io/autoscaler/cluster-autoscaler/cloudprovider/aws"
	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
	"k8s.io/autoscaler/cluster-autoscaler/test/framework"
	"k8s.io/autoscaler/cluster-autoscaler/test/integration/itest"
)

// draGroup is one Auto Scaling group of the DRA matrix: its instance type
// and what the vendor's DRA driver publishes on one of its nodes (written
// here from the vendors' documentation, independently of the provider's
// templates): devices of driver, each with the attribute attr=value.
type draGroup struct {
	name, instanceType, driver string
	devices                    int
	attr, value                string
}

// draPodSet is a set of pods, each with a claim for count devices of
// class whose attribute attr is value (no selector when attr is empty),
// and the group (and node count) that must serve them.
type draPodSet struct {
	name, class string
	pods        int
	count       int64
	attr, value string
	group       string
	nodes       int
}

// publishDevices plays the DRA drivers of the test's nodes: for every
// node of a group in groups, the ResourceSlice its driver publishes (once;
// deleted when the test ends).
func publishDevices(e *framework.Env, groups []draGroup) {
	byPool := map[string]draGroup{}
	for _, g := range groups {
		byPool[g.name] = g
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	published := map[string]bool{}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			nodes, err := e.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: framework.TestNamespaceLabel + "=" + e.Namespace})
			if err == nil {
				for _, n := range nodes.Items {
					g, ok := byPool[n.Labels["pool"]]
					if !ok || g.devices == 0 || published[n.Name] {
						continue
					}
					if err := createDriverSlice(ctx, e, &n, g); err == nil || apierrors.IsAlreadyExists(err) {
						published[n.Name] = true
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	e.T.Cleanup(func() {
		cancel()
		<-done
		for name := range published {
			_ = e.Client.ResourceV1().ResourceSlices().Delete(context.Background(), name+"-dra", metav1.DeleteOptions{})
		}
	})
}

func createDriverSlice(ctx context.Context, e *framework.Env, n *apiv1.Node, g draGroup) error {
	name := n.Name
	sl := &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: name + "-dra",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}},
		Spec: resourceapi.ResourceSliceSpec{Driver: g.driver, NodeName: &name,
			Pool: resourceapi.ResourcePool{Name: name, Generation: 1, ResourceSliceCount: 1}}}
	for i := 0; i < g.devices; i++ {
		v := g.value
		d := resourceapi.Device{Name: fmt.Sprintf("dev-%d", i), Attributes: map[resourceapi.QualifiedName]resourceapi.DeviceAttribute{
			resourceapi.QualifiedName(g.attr): {StringValue: &v}}}
		if g.driver == awsprovider.NVIDIADRADriver {
			gpu := "gpu"
			d.Attributes["type"] = resourceapi.DeviceAttribute{StringValue: &gpu}
		}
		sl.Spec.Devices = append(sl.Spec.Devices, d)
	}
	_, err := e.Client.ResourceV1().ResourceSlices().Create(ctx, sl, metav1.CreateOptions{})
	return err
}

// createSelectingClaimTemplate creates a ResourceClaimTemplate for count
// devices of class whose driver-qualified attribute attr is value.
func createSelectingClaimTemplate(e *framework.Env, name, class, driver string, count int64, attr, value string) {
	e.T.Helper()
	req := &resourceapi.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourceapi.DeviceAllocationModeExactCount, Count: count}
	if attr != "" {
		req.Selectors = []resourceapi.DeviceSelector{{CEL: &resourceapi.CELDeviceSelector{
			Expression: fmt.Sprintf("device.attributes[%q].%s == %q", driver, attr, value)}}}
	}
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: name},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{Devices: resourceapi.DeviceClaim{
			Requests: []resourceapi.DeviceRequest{{Name: "gpu", Exactly: req}}}}}}
	if _, err := e.Client.ResourceV1().ResourceClaimTemplates(e.Namespace).Create(e.Context(), tmpl, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

var loopOfLine = regexp.MustCompile(`"loop"=(\d+)|loop=(\d+)`)

// TestAWSDRAGroupsAtZeroMatrix: Auto Scaling groups at zero of several GPU
// and Neuron instance types, each tagged with the DRA driver its nodes
// run, and one CPU group tagged with NVIDIA's driver; sets of pods whose
// claims ask for N devices (with a selector on productName, or on the
// Neuron instanceType). Each set gets exactly ceil(pods*N/devices-per-node)
// instances of its group, in one SetDesiredCapacity; no other group is
// scaled; the CPU group, whose template publishes no device, stays at
// zero. kube-scheduler allocates the claims on the slices the nodes then
// publish, and the pods run.
func TestAWSDRAGroupsAtZeroMatrix(t *testing.T) {
	e := framework.New(t)
	s := startAWS(e)
	for _, it := range awsfake.AcceleratedInstanceTypes() {
		s.AddInstanceType(it)
	}
	groups := []draGroup{
		{"p4d", "p4d.24xlarge", awsprovider.NVIDIADRADriver, 8, "productName", "NVIDIA A100-SXM4-40GB"},
		{"p5", "p5.48xlarge", awsprovider.NVIDIADRADriver, 8, "productName", "NVIDIA H100 80GB HBM3"},
		{"g5", "g5.xlarge", awsprovider.NVIDIADRADriver, 1, "productName", "NVIDIA A10G"},
		{"g6", "g6.12xlarge", awsprovider.NVIDIADRADriver, 4, "productName", "NVIDIA L4"},
		{"inf2", "inf2.48xlarge", awsprovider.NeuronDRADriver, 12, "instanceType", "inf2.48xlarge"},
		{"trn1", "trn1.32xlarge", awsprovider.NeuronDRADriver, 16, "instanceType", "trn1.32xlarge"},
		{"cpu", "m5.xlarge", awsprovider.NVIDIADRADriver, 0, "", ""},
	}
	nvidia, neuron := e.Namespace+"-nvidia", e.Namespace+"-neuron"
	sets := []draPodSet{
		{"h100x8", nvidia, 2, 8, "productName", "NVIDIA H100 80GB HBM3", "p5", 2},
		{"a100x4", nvidia, 2, 4, "productName", "NVIDIA A100-SXM4-40GB", "p4d", 1},
		{"l4x4", nvidia, 3, 4, "productName", "NVIDIA L4", "g6", 3},
		{"l4x2", nvidia, 2, 2, "productName", "NVIDIA L4", "g6", 1},
		{"a10gx1", nvidia, 3, 1, "productName", "NVIDIA A10G", "g5", 3},
		{"inf2x6", neuron, 2, 6, "instanceType", "inf2.48xlarge", "inf2", 1},
		{"trn1x16", neuron, 1, 16, "instanceType", "trn1.32xlarge", "trn1", 1},
	}
	itest.CreateDeviceClass(e, nvidia, awsprovider.NVIDIADRADriver)
	itest.CreateDeviceClass(e, neuron, awsprovider.NeuronDRADriver)
	var nodesArgs []string
	for _, g := range groups {
		s.AddLaunchTemplate(awsfake.LaunchTemplate{Name: "lt-" + g.name, DefaultVersion: 1,
			Versions: []awsfake.LaunchTemplateVersion{{Number: 1, InstanceType: g.instanceType}}})
		ag := awsGroup(g.name, 0, 10, 0, map[string]string{awsprovider.DRADriverTag: g.driver})
		ag.LaunchTemplate = &awsfake.LaunchTemplateSpec{Name: "lt-" + g.name, Version: "$Default"}
		s.AddGroup(ag)
		nodesArgs = append(nodesArgs, "--nodes=0:10:"+g.name)
	}
	publishDevices(e, groups)
	itest.DumpPods(e)
	want := map[string]int{}
	totalPods := 0
	for _, ps := range sets {
		driver := awsprovider.NVIDIADRADriver
		if ps.class == neuron {
			driver = awsprovider.NeuronDRADriver
		}
		createSelectingClaimTemplate(e, ps.name, ps.class, driver, ps.count, ps.attr, ps.value)
		for i := 0; i < ps.pods; i++ {
			pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.Namespace, Name: fmt.Sprintf("%s-%d", ps.name, i)},
				Spec: itest.ClaimPodSpec(ps.name)}
			pod.Spec.Containers[0].Resources.Requests[apiv1.ResourceCPU] = resource.MustParse("500m")
			if _, err := e.Client.CoreV1().Pods(e.Namespace).Create(e.Context(), pod, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		want[ps.group] += ps.nodes
		totalPods += ps.pods
	}

	start := time.Now()
	p := itest.StartAutoscalerEnv(t, s.Env(), "autoscaler", append(awsArgs(e), nodesArgs...)...)
	var decided time.Duration
	e.Eventually(120*time.Second, "every group at its wanted desired capacity", func(ctx context.Context) (bool, error) {
		for _, g := range groups {
			if s.GroupState(g.name).Desired != want[g.name] {
				return false, nil
			}
		}
		decided = time.Since(start)
		return true, nil
	})
	e.Eventually(120*time.Second, fmt.Sprintf("all %d pods Running with their claims allocated", totalPods), func(ctx context.Context) (bool, error) {
		if ok, err := itest.AllRunning(ctx, e, totalPods); !ok || err != nil {
			return false, err
		}
		claims, err := e.Client.ResourceV1().ResourceClaims(e.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		allocated := 0
		for _, c := range claims.Items {
			if c.Status.Allocation != nil {
				allocated++
			}
		}
		return allocated == totalPods, nil
	})
	running := time.Since(start)
	// Several more loops (1 s scan interval) must add nothing.
	time.Sleep(4 * time.Second)

	missed, wrong, scaleUps := 0, 0, 0
	loops := map[string]bool{}
	for _, g := range groups {
		changes := s.DesiredChanges(g.name)
		scaleUps += len(changes)
		got := s.GroupState(g.name).Desired
		switch {
		case want[g.name] == 0 && got > 0:
			wrong += got
		case got < want[g.name]:
			missed += want[g.name] - got
		case got > want[g.name]:
			wrong += got - want[g.name]
		}
		if want[g.name] > 0 && (len(changes) != 1 || changes[0].From != 0 || changes[0].To != want[g.name]) {
			t.Errorf("group %s: desired-capacity changes %+v, want one from 0 to %d", g.name, changes, want[g.name])
		}
		if want[g.name] == 0 && len(changes) != 0 {
			t.Errorf("group %s (no devices) was scaled: %+v", g.name, changes)
		}
	}
	for _, line := range strings.Split(p.Log.String(), "\n") {
		if strings.Contains(line, "Set the desired capacity of an Auto Scaling group") {
			if m := loopOfLine.FindStringSubmatch(line); m != nil {
				loops[m[1]+m[2]] = true
			}
		}
	}
	if missed != 0 || wrong != 0 {
		t.Errorf("missed %d, wrong-group %d instances; want 0 and 0", missed, wrong)
	}
	if got := itest.NodesPerPool(e); fmt.Sprint(got) != fmt.Sprint(nonZero(want)) {
		t.Errorf("nodes per group %v, want %v", got, nonZero(want))
	}
	if !p.Log.Written("Template publishes no DRA devices for the Auto Scaling group") {
		t.Error("no log line says why the CPU group's template has no devices")
	}
	loopList := make([]string, 0, len(loops))
	for l := range loops {
		loopList = append(loopList, l)
	}
	sort.Strings(loopList)
	t.Logf("DRA matrix: %d groups, %d pod sets, %d pods; %d scale-ups (%v), missed %d, wrong-group %d; in loops %v; "+
		"desired capacities set after %v, all pods Running after %v", len(groups), len(sets), totalPods, scaleUps, nonZero(want),
		missed, wrong, loopList, decided.Round(10*time.Millisecond), running.Round(10*time.Millisecond))
}

func nonZero(m map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		if v > 0 {
			out[k] = v
		}
	}
	return out
}
