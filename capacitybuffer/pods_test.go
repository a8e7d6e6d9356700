package capacitybuffer

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	v1 "k8s.io/autoscaler/cluster-autoscaler/capacitybuffer/apis/autoscaling.x-k8s.io/v1beta1"
)

func template() *apiv1.PodTemplateSpec {
	return &apiv1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec: apiv1.PodSpec{
			NodeSelector: map[string]string{"pool": "a"},
			InitContainers: []apiv1.Container{{Name: "init", Resources: apiv1.ResourceRequirements{
				Limits: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("2")}}}},
			Containers: []apiv1.Container{{Name: "main", Resources: apiv1.ResourceRequirements{
				Requests: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("500m")},
				Limits: apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1"),
					apiv1.ResourceMemory: resource.MustParse("1Gi")}}}},
		},
	}
}

func TestPodFromTemplateDefaultsRequestsFromLimits(t *testing.T) {
	tmpl := template()
	pod := PodFromTemplate("ns", tmpl)
	if pod.Namespace != "ns" || pod.Labels["app"] != "web" || pod.Spec.NodeSelector["pool"] != "a" {
		t.Errorf("pod %s/%s labels %v selector %v", pod.Namespace, pod.Name, pod.Labels, pod.Spec.NodeSelector)
	}
	main := pod.Spec.Containers[0].Resources.Requests
	if main.Cpu().String() != "500m" || main.Memory().String() != "1Gi" {
		t.Errorf("main requests %v, want the cpu request kept and memory from its limit", main)
	}
	if got := pod.Spec.InitContainers[0].Resources.Requests.Cpu().String(); got != "2" {
		t.Errorf("init cpu request %s, want 2 from its limit", got)
	}
	// The init container's 2 CPUs dominate.
	if got := Requests(pod); got.Cpu().String() != "2" || got.Memory().String() != "1Gi" {
		t.Errorf("Requests %v, want cpu 2, memory 1Gi", got)
	}
	if tmpl.Spec.Containers[0].Resources.Requests.Memory().Sign() != 0 {
		t.Error("the template was modified")
	}
}

func TestFakePods(t *testing.T) {
	b := &v1.CapacityBuffer{ObjectMeta: metav1.ObjectMeta{Name: "spare", Namespace: "team", UID: "u1",
		CreationTimestamp: metav1.Unix(100, 0)}}
	pods := FakePods(b, template(), 3)
	if len(pods) != 3 {
		t.Fatalf("%d pods, want 3", len(pods))
	}
	var names []string
	for i, p := range pods {
		names = append(names, p.Name)
		if !IsFakePod(p) || p.Namespace != "team" || p.Spec.NodeName != "" || p.Status.Phase != apiv1.PodPending {
			t.Errorf("pod %d: fake %v namespace %q node %q phase %q", i, IsFakePod(p), p.Namespace, p.Spec.NodeName, p.Status.Phase)
		}
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != "u1" || ref.Kind != "CapacityBuffer" || ref.APIVersion != "autoscaling.x-k8s.io/v1beta1" {
			t.Errorf("pod %d: controller %+v", i, ref)
		}
		if p.Spec.Containers[0].Resources.Requests.Memory().String() != "1Gi" {
			t.Errorf("pod %d: requests not defaulted from limits", i)
		}
	}
	if diff := cmp.Diff([]string{"capacity-buffer-spare-1", "capacity-buffer-spare-2", "capacity-buffer-spare-3"}, names); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
	if pods[0].UID == pods[1].UID || pods[0].UID != types.UID("u1-1") {
		t.Errorf("UIDs %q %q", pods[0].UID, pods[1].UID)
	}
	pods[0].Labels["x"] = "y"
	if _, shared := pods[1].Labels["x"]; shared {
		t.Error("pods share their maps")
	}
	if FakePods(b, template(), 0) != nil {
		t.Error("zero pods asked, some built")
	}
	if IsFakePod(&apiv1.Pod{}) || IsFakePod(nil) {
		t.Error("a plain pod is fake")
	}
}

func TestTemplateFromPodDropsTheTokenVolume(t *testing.T) {
	pod := &apiv1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dry-run-x", Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{"admitted": "yes"}},
		Spec: apiv1.PodSpec{NodeName: "n1",
			Volumes: []apiv1.Volume{{Name: "kube-api-access-abcde"}, {Name: "data"}},
			Containers: []apiv1.Container{{Name: "main", VolumeMounts: []apiv1.VolumeMount{
				{Name: "kube-api-access-abcde", MountPath: "/var/run/secrets"}, {Name: "data", MountPath: "/data"}}}}}}
	got := TemplateFromPod(pod)
	want := apiv1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"},
		Annotations: map[string]string{"admitted": "yes"}},
		Spec: apiv1.PodSpec{Volumes: []apiv1.Volume{{Name: "data"}},
			Containers: []apiv1.Container{{Name: "main", VolumeMounts: []apiv1.VolumeMount{{Name: "data", MountPath: "/data"}}}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if pod.Spec.NodeName != "n1" || len(pod.Spec.Volumes) != 2 {
		t.Error("the pod was modified")
	}
}

func TestManagedTemplateName(t *testing.T) {
	if got := ManagedTemplateName("web"); got != "capacitybuffer-web-pod-template" {
		t.Errorf("got %q", got)
	}
	long := strings.Repeat("a", 253)
	if got := ManagedTemplateName(long); len(got) != 253 || !strings.HasPrefix(got, "capacitybuffer-a") ||
		!strings.HasSuffix(got, "a-pod-template") {
		t.Errorf("long name: %d characters, %q...", len(got), got[:20])
	}
}
