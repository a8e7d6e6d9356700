package capacitybuffer

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func quota(name string, hard, used apiv1.ResourceList) *apiv1.ResourceQuota {
	return &apiv1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: apiv1.ResourceQuotaSpec{Hard: hard},
		Status: apiv1.ResourceQuotaStatus{Hard: hard, Used: used}}
}

func TestQuotaUsage(t *testing.T) {
	pod := PodFromTemplate("ns", template()) // init 2 CPU limit; main 500m request, 1 CPU and 1Gi limits
	got := QuotaUsage(pod)
	want := map[string]string{"pods": "1", "count/pods": "1", "cpu": "2", "requests.cpu": "2", "memory": "1Gi",
		"requests.memory": "1Gi", "limits.cpu": "2", "limits.memory": "1Gi"}
	gotS := map[string]string{}
	for n, q := range got {
		gotS[string(n)] = q.String()
	}
	if diff := cmp.Diff(want, gotS); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestQuotaRoom(t *testing.T) {
	chunk := requests("pods", "1", "requests.cpu", "1", "cpu", "1", "requests.memory", "1Gi")
	for _, tc := range []struct {
		name     string
		quotas   []*apiv1.ResourceQuota
		held     apiv1.ResourceList
		room     int32
		applies  bool
		limiting []string
	}{
		{name: "no quota", room: 2147483647},
		{name: "a quota on other things", quotas: []*apiv1.ResourceQuota{quota("q", requests("services", "2"), nil)},
			room: 2147483647},
		{name: "cpu left", quotas: []*apiv1.ResourceQuota{quota("q", requests("requests.cpu", "10"), requests("requests.cpu", "4500m"))},
			room: 5, applies: true, limiting: []string{"q (requests.cpu)"}},
		{name: "cpu held by earlier buffers", quotas: []*apiv1.ResourceQuota{quota("q", requests("requests.cpu", "10"), requests("requests.cpu", "4"))},
			held: requests("requests.cpu", "5"), room: 1, applies: true, limiting: []string{"q (requests.cpu)"}},
		{name: "over quota already", quotas: []*apiv1.ResourceQuota{quota("q", requests("cpu", "2"), requests("cpu", "3"))},
			room: 0, applies: true, limiting: []string{"q (cpu)"}},
		{name: "the tightest of two quotas", quotas: []*apiv1.ResourceQuota{
			quota("a", requests("requests.cpu", "10"), nil), quota("b", requests("pods", "4", "requests.memory", "100Gi"), requests("pods", "1"))},
			room: 3, applies: true, limiting: []string{"b (pods)"}},
		{name: "a scoped quota is not counted", quotas: []*apiv1.ResourceQuota{func() *apiv1.ResourceQuota {
			q := quota("best-effort", requests("pods", "1"), nil)
			q.Spec.Scopes = []apiv1.ResourceQuotaScope{apiv1.ResourceQuotaScopeBestEffort}
			return q
		}()}, room: 2147483647},
		{name: "status not written yet: spec.hard", quotas: []*apiv1.ResourceQuota{{ObjectMeta: metav1.ObjectMeta{Name: "new"},
			Spec: apiv1.ResourceQuotaSpec{Hard: requests("requests.cpu", "3")}}}, room: 3, applies: true, limiting: []string{"new (requests.cpu)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			room, applies, limiting := QuotaRoom(tc.quotas, tc.held, chunk)
			if room != tc.room || applies != tc.applies || !cmp.Equal(limiting, tc.limiting) {
				t.Errorf("room %d applies %v limiting %v; want %d %v %v", room, applies, limiting, tc.room, tc.applies, tc.limiting)
			}
		})
	}
}

func TestAdd(t *testing.T) {
	total := apiv1.ResourceList{apiv1.ResourceCPU: resource.MustParse("1")}
	Add(total, requests("cpu", "500m", "pods", "1"), 3)
	Add(total, requests("cpu", "100"), 0)
	if total.Cpu().String() != "2500m" || total.Pods().String() != "3" {
		t.Errorf("total %v", total)
	}
}
