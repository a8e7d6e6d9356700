package informercache

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	resourcehelper "k8s.io/component-helpers/resource"
	"sigs.k8s.io/yaml"
)

var trimTestPods = []string{"pod-bound-minimal.yaml", "pod-deployment-typical.yaml"}

func loadPod(t testing.TB, name string) *apiv1.Pod {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var pod apiv1.Pod
	if err := yaml.UnmarshalStrict(data, &pod); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return &pod
}

// TestTrimForCacheKeepsWhatTheAutoscalerReads: a trimmed pod differs from
// the original only in the fields the trim names, and its requests and
// limits (as the scheduler computes them, in-place resize included) are
// the same.
func TestTrimForCacheKeepsWhatTheAutoscalerReads(t *testing.T) {
	dropped := cmp.Options{
		cmpopts.IgnoreFields(metav1.ObjectMeta{}, "ManagedFields"),
		cmpopts.IgnoreFields(apiv1.Container{}, "Command", "Args", "WorkingDir", "Env", "EnvFrom", "VolumeMounts",
			"VolumeDevices", "LivenessProbe", "ReadinessProbe", "StartupProbe", "Lifecycle", "TerminationMessagePath",
			"TerminationMessagePolicy", "ImagePullPolicy", "SecurityContext", "Stdin", "StdinOnce", "TTY"),
		cmpopts.IgnoreFields(apiv1.PodSpec{}, "EphemeralContainers"),
		cmpopts.IgnoreFields(apiv1.PodStatus{}, "EphemeralContainerStatuses", "PodIP", "PodIPs", "HostIP", "HostIPs"),
		cmpopts.IgnoreFields(apiv1.ContainerStatus{}, "State", "LastTerminationState", "Ready", "Started",
			"RestartCount", "Image", "ImageID", "ContainerID", "VolumeMounts", "User", "AllocatedResourcesStatus",
			"StopSignal"),
	}
	for _, name := range trimTestPods {
		t.Run(name, func(t *testing.T) {
			pod := loadPod(t, name)
			// A pod being resized in place: its status resources count.
			if len(pod.Status.ContainerStatuses) > 0 {
				cs := &pod.Status.ContainerStatuses[0]
				cs.Resources = &apiv1.ResourceRequirements{Requests: pod.Spec.Containers[0].Resources.Requests}
				cs.AllocatedResources = pod.Spec.Containers[0].Resources.Requests
			}
			pod.Spec.EphemeralContainers = []apiv1.EphemeralContainer{{EphemeralContainerCommon: apiv1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox"}}}
			// A resize the node cannot take: the scheduler reads this
			// condition to decide which requests count.
			pod.Status.Conditions = append(pod.Status.Conditions, apiv1.PodCondition{Type: apiv1.PodResizePending,
				Status: apiv1.ConditionTrue, Reason: apiv1.PodReasonInfeasible})
			before := pod.DeepCopy()
			got, err := NewTrimmer().Transform(pod)
			if err != nil {
				t.Fatal(err)
			}
			after := got.(*apiv1.Pod)
			if name == "pod-deployment-typical.yaml" && (len(after.Status.ContainerStatuses) != 1 || after.Status.InitContainerStatuses != nil) {
				t.Errorf("statuses kept: %d, %d; want the one reporting resources only",
					len(after.Status.ContainerStatuses), len(after.Status.InitContainerStatuses))
			}
			// Statuses left with nothing but a name are dropped: compare
			// with the ones that report resources.
			want := before.DeepCopy()
			want.Status.ContainerStatuses = withResources(want.Status.ContainerStatuses)
			want.Status.InitContainerStatuses = withResources(want.Status.InitContainerStatuses)
			want.Status.Conditions = nil
			for _, c := range before.Status.Conditions {
				switch c.Type {
				case apiv1.PodReady, apiv1.ContainersReady, apiv1.PodInitialized, apiv1.PodReadyToStartContainers:
				default:
					want.Status.Conditions = append(want.Status.Conditions, c)
				}
			}
			if last := want.Status.Conditions[len(want.Status.Conditions)-1]; last.Type != apiv1.PodResizePending {
				t.Fatalf("test pod: want PodResizePending kept, got %+v", want.Status.Conditions)
			}
			if name == "pod-deployment-typical.yaml" && (len(after.Status.Conditions) != 2 || after.Status.Conditions[0].Type != apiv1.PodScheduled) {
				t.Errorf("conditions kept: %+v; want PodScheduled and PodResizePending", after.Status.Conditions)
			}
			if after.Status.PodIP != "" || after.Status.PodIPs != nil || after.Status.HostIP != "" || after.Status.HostIPs != nil {
				t.Errorf("IPs kept: %+v", after.Status)
			}
			if diff := cmp.Diff(want, after, dropped); diff != "" {
				t.Errorf("trimmed pod differs in fields the trim keeps (-before +after):\n%s", diff)
			}
			if after.ManagedFields != nil || after.Spec.EphemeralContainers != nil {
				t.Errorf("managedFields or ephemeral containers kept")
			}
			for _, c := range after.Spec.Containers {
				if c.Env != nil || c.LivenessProbe != nil || c.VolumeMounts != nil || c.TerminationMessagePath != "" {
					t.Errorf("container %s: kubelet-only fields kept", c.Name)
				}
			}
			opts := resourcehelper.PodResourcesOptions{UseStatusResources: true}
			if diff := cmp.Diff(resourcehelper.PodRequests(before, opts), resourcehelper.PodRequests(after, opts)); diff != "" {
				t.Errorf("requests changed (-before +after):\n%s", diff)
			}
			if diff := cmp.Diff(resourcehelper.PodLimits(before, opts), resourcehelper.PodLimits(after, opts)); diff != "" {
				t.Errorf("limits changed (-before +after):\n%s", diff)
			}
		})
	}
}

func withResources(statuses []apiv1.ContainerStatus) []apiv1.ContainerStatus {
	var out []apiv1.ContainerStatus
	for _, s := range statuses {
		if s.Resources != nil || s.AllocatedResources != nil {
			out = append(out, s)
		}
	}
	return out
}

// TestTrimForCacheOtherObjects: other kinds lose their managedFields only;
// what is not an object (a deletion tombstone) passes unchanged.
func TestTrimForCacheOtherObjects(t *testing.T) {
	node := &apiv1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "b"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Status: apiv1.NodeStatus{Images: []apiv1.ContainerImage{{Names: []string{"img"}}}}}
	want := node.DeepCopy()
	want.ManagedFields = nil
	trim := NewTrimmer()
	got, err := trim.Transform(node)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("node (-want +got):\n%s", diff)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: &apiv1.Pod{}}
	if got, err := trim.Transform(tomb); err != nil || !cmp.Equal(got, tomb) {
		t.Errorf("tombstone: got %v, %v", got, err)
	}
}

// BenchmarkCachedPodMemory: the heap one cached pod takes, decoded from
// protobuf as the informers receive it: as decoded, trimmed, and trimmed
// with the parts the pods of a workload have in common shared. The pods are
// those of the scale benchmark (test/integration BenchmarkScale) and a
// typical Deployment pod, in workloads of 300 pods spread over 1,000 nodes.
//
//	go test -run xxx -bench CachedPodMemory -benchtime 1x ./cluster-autoscaler
func BenchmarkCachedPodMemory(b *testing.B) {
	const n, perWorkload = 30000, 300
	for _, name := range trimTestPods {
		base := loadPod(b, name)
		encoded := make([][]byte, n)
		for j := range encoded {
			p := base.DeepCopy()
			w := j / perWorkload
			p.Name = fmt.Sprintf("%s-%d", base.Name, j)
			p.UID = types.UID(fmt.Sprintf("6f1c2d7e-93a4-4b51-8e0f-%012d", j))
			p.Spec.NodeName = fmt.Sprintf("node-%04d", j%1000)
			p.OwnerReferences[0].Name = fmt.Sprintf("workload-%d", w)
			p.OwnerReferences[0].UID = types.UID(fmt.Sprintf("0b0a5e52-2d6f-4a55-9c63-%012d", w))
			p.Labels = maps.Clone(p.Labels)
			p.Labels["workload"] = strconv.Itoa(w)
			data, err := p.Marshal()
			if err != nil {
				b.Fatal(err)
			}
			encoded[j] = data
		}
		for _, mode := range []string{"as-decoded", "trimmed", "trimmed-shared"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					var transform func(any) (any, error)
					switch mode {
					case "trimmed":
						transform = (&Trimmer{}).Transform
					case "trimmed-shared":
						transform = NewTrimmer().Transform
					}
					pods := make([]*apiv1.Pod, n)
					runtime.GC()
					var m0, m1 runtime.MemStats
					runtime.ReadMemStats(&m0)
					for j := range pods {
						p := &apiv1.Pod{}
						if err := p.Unmarshal(encoded[j]); err != nil {
							b.Fatal(err)
						}
						if transform != nil {
							_, _ = transform(p)
						}
						pods[j] = p
					}
					runtime.GC()
					runtime.ReadMemStats(&m1)
					b.ReportMetric(float64(m1.HeapAlloc-m0.HeapAlloc)/n, "heap-B/pod")
					runtime.KeepAlive(pods)
				}
			})
		}
	}
}

// BenchmarkCacheTransform: the CPU of decoding one pod and transforming it,
// per mode (see BenchmarkCachedPodMemory).
//
//	go test -run xxx -bench CacheTransform ./cluster-autoscaler
func BenchmarkCacheTransform(b *testing.B) {
	for _, name := range trimTestPods {
		data, err := loadPod(b, name).Marshal()
		if err != nil {
			b.Fatal(err)
		}
		for _, mode := range []string{"as-decoded", "trimmed", "trimmed-shared"} {
			b.Run(name+"/"+mode, func(b *testing.B) {
				var transform func(any) (any, error)
				switch mode {
				case "trimmed":
					transform = (&Trimmer{}).Transform
				case "trimmed-shared":
					transform = NewTrimmer().Transform
				}
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					p := &apiv1.Pod{}
					if err := p.Unmarshal(data); err != nil {
						b.Fatal(err)
					}
					if transform != nil {
						_, _ = transform(p)
					}
				}
			})
		}
	}
}
