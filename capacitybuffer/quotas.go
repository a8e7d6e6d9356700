package capacitybuffer

import (
	"fmt"
	"math"
	"slices"

	apiv1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
)

// QuotaUsage is what one pod counts against a ResourceQuota, under the
// quota's resource names: pods and count/pods one each; cpu, memory and
// ephemeral-storage, bare and as requests.*; requests.* of extended
// resources; limits.* of the pod's limits.
func QuotaUsage(pod *apiv1.Pod) apiv1.ResourceList {
	one := resource.MustParse("1")
	usage := apiv1.ResourceList{apiv1.ResourcePods: one, "count/pods": one}
	for name, q := range Requests(pod) {
		if name == apiv1.ResourcePods {
			continue
		}
		usage[apiv1.ResourceName("requests."+string(name))] = q
		if name == apiv1.ResourceCPU || name == apiv1.ResourceMemory || name == apiv1.ResourceEphemeralStorage {
			usage[name] = q
		}
	}
	for name, q := range resourcehelper.PodLimits(pod, resourcehelper.PodResourcesOptions{}) {
		usage[apiv1.ResourceName("limits."+string(name))] = q
	}
	return usage
}

// Add adds n times each quantity of b to a.
func Add(a, b apiv1.ResourceList, n int32) {
	if n <= 0 {
		return
	}
	for name, q := range b {
		scaled := q.DeepCopy()
		scaled.Mul(int64(n))
		total := a[name]
		total.Add(scaled)
		a[name] = total
	}
}

// QuotaRoom is how many chunks of usage (QuotaUsage of one chunk's pod) the
// quotas leave, after what they count as used and what held (the chunks of
// other buffers) takes. Quotas with scopes are not counted: they apply to
// some pods only. applies is false when no quota limits anything the chunk
// uses; limiting names the quotas and resources that give the room.
func QuotaRoom(quotas []*apiv1.ResourceQuota, held, usage apiv1.ResourceList) (room int32, applies bool, limiting []string) {
	room = math.MaxInt32
	type bound struct {
		room   int32
		reason string
	}
	var bounds []bound
	for _, q := range quotas {
		if len(q.Spec.Scopes) > 0 || q.Spec.ScopeSelector != nil {
			continue
		}
		hard := q.Status.Hard
		if len(hard) == 0 {
			hard = q.Spec.Hard
		}
		left := apiv1.ResourceList{}
		for name, h := range hard {
			l := h.DeepCopy()
			if used, ok := q.Status.Used[name]; ok {
				l.Sub(used)
			}
			if h, ok := held[name]; ok {
				l.Sub(h)
			}
			left[name] = l
		}
		for name, l := range left {
			u, ok := usage[name]
			if !ok || u.Sign() <= 0 {
				continue
			}
			applies = true
			n := int32(min(quotient(l, u), math.MaxInt32))
			bounds = append(bounds, bound{n, fmt.Sprintf("%s (%s)", q.Name, name)})
			room = min(room, n)
		}
	}
	for _, b := range bounds {
		if b.room == room && room < math.MaxInt32 {
			limiting = append(limiting, b.reason)
		}
	}
	slices.Sort(limiting)
	return room, applies, limiting
}
