package estimator

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	apiv1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
	"k8s.io/autoscaler/cluster-autoscaler/internal/testbuild"
	"k8s.io/autoscaler/cluster-autoscaler/simulator/framework"
)

const (
	zoneLabel   = "topology.kubernetes.io/zone"
	csiDriver   = "csi.example.com"
	csiClass    = "csi"   // WaitForFirstConsumer, provisioned by csiDriver
	staticClass = "local" // WaitForFirstConsumer, static PVs only
)

// defaultSpreadConfig is a scheduler profile that spreads every pod a
// Service or controller selects over hostnames, DoNotSchedule.
const defaultSpreadConfig = `apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - maxSkew: 1
        topologyKey: kubernetes.io/hostname
        whenUnsatisfiable: DoNotSchedule
`

func replicaSetOf(owner string) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: owner, UID: testbuild.UID(owner)},
		Spec: appsv1.ReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": owner}}}}
}

func storageClass(name, provisioner string) *storagev1.StorageClass {
	return &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: provisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer)}
}

func pvc(name, class string, mode apiv1.PersistentVolumeAccessMode) *apiv1.PersistentVolumeClaim {
	return &apiv1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("pvc-" + name)},
		Spec: apiv1.PersistentVolumeClaimSpec{StorageClassName: ptr.To(class), AccessModes: []apiv1.PersistentVolumeAccessMode{mode},
			Resources: apiv1.VolumeResourceRequirements{Requests: apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")}}},
		Status: apiv1.PersistentVolumeClaimStatus{Phase: apiv1.ClaimPending}}
}

// zonalPV is a static PV of staticClass usable in zone only.
func zonalPV(name, zone string) *apiv1.PersistentVolume {
	return &apiv1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: apiv1.PersistentVolumeSpec{StorageClassName: staticClass,
			Capacity:               apiv1.ResourceList{apiv1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []apiv1.PersistentVolumeAccessMode{apiv1.ReadWriteOnce},
			PersistentVolumeSource: apiv1.PersistentVolumeSource{Local: &apiv1.LocalVolumeSource{Path: "/mnt/" + name}},
			NodeAffinity: &apiv1.VolumeNodeAffinity{Required: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
				MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: zoneLabel, Operator: apiv1.NodeSelectorOpIn, Values: []string{zone}}}}}}}},
		Status: apiv1.PersistentVolumeStatus{Phase: apiv1.VolumeAvailable}}
}

// withClaim mounts claim name (the same claim for every pod).
func withClaim(name string) func(*apiv1.Pod) {
	return func(p *apiv1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, apiv1.Volume{Name: "data",
			VolumeSource: apiv1.VolumeSource{PersistentVolumeClaim: &apiv1.PersistentVolumeClaimVolumeSource{ClaimName: name}}})
	}
}

// withOwnClaim mounts claim data-<pod>, as a StatefulSet's volumeClaimTemplates do.
func withOwnClaim(p *apiv1.Pod) { withClaim("data-" + p.Name)(p) }

// withEphemeral gives the pod a generic ephemeral volume of csiClass.
func withEphemeral(p *apiv1.Pod) {
	p.Spec.Volumes = append(p.Spec.Volumes, apiv1.Volume{Name: "scratch", VolumeSource: apiv1.VolumeSource{
		Ephemeral: &apiv1.EphemeralVolumeSource{VolumeClaimTemplate: &apiv1.PersistentVolumeClaimTemplate{
			Spec: pvc("", csiClass, apiv1.ReadWriteOnce).Spec}}}})
}

// ephemeralClaims are the claims the ephemeral volume controller creates for pods.
func ephemeralClaims(pods []*apiv1.Pod) []runtime.Object {
	var out []runtime.Object
	for _, p := range pods {
		c := pvc(p.Name+"-scratch", csiClass, apiv1.ReadWriteOnce)
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true)}}
		out = append(out, c)
	}
	return out
}

func csiNodeWithLimit(name string, limit int32) *storagev1.CSINode {
	return &storagev1.CSINode{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: storagev1.CSINodeSpec{Drivers: []storagev1.CSINodeDriver{{
		Name: csiDriver, NodeID: name, Allocatable: &storagev1.VolumeNodeResources{Count: ptr.To(limit)}}}}}
}

func inZone(info *cloudprovider.NodeInfo, zone string) *cloudprovider.NodeInfo {
	info.Node.Labels[zoneLabel] = zone
	return info
}

// waitForClaims waits until the volume binder's caches, fed by informer
// handlers after the sync, know the claims of pods.
func waitForClaims(t *testing.T, sim *framework.Handle, pods []*apiv1.Pod) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range pods {
			if err := sim.Prepare(ctx, p).Err(); err != nil && strings.Contains(err.Error(), "not found") {
				last = err
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("claims not known to the simulator: %v", last)
	}
}

// TestEstimateMatchesPodByPodBeyondThePodSpec: constraints that do not come
// from the pod spec alone (the profile's default spread constraints,
// ReadWriteOncePod claims, CSI attach limits, volume binding) give the same
// estimate as placing the pods one by one. Each case's reference needs
// more nodes, or schedules fewer pods, than one node-class fill would.
func TestEstimateMatchesPodByPodBeyondThePodSpec(t *testing.T) {
	spreadConfig := filepath.Join(t.TempDir(), "scheduler.yaml")
	if err := os.WriteFile(spreadConfig, []byte(defaultSpreadConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	// A real node the spread counts as an empty hostname domain: it matches
	// the pods but has no room left.
	full := templateInfo("1").Node.DeepCopy()
	full.Name = "full"
	full.Labels[apiv1.LabelHostname] = "full"
	filler := pods("filler", 1, "1")[0]
	filler.Labels = nil

	ephemeralPods := pods("eph", 12, "100m", withEphemeral)
	statefulPods := pods("db", 5, "100m", withOwnClaim)
	var statefulObjs []runtime.Object
	statefulObjs = append(statefulObjs, storageClass(staticClass, "kubernetes.io/no-provisioner"))
	for _, p := range statefulPods {
		statefulObjs = append(statefulObjs, pvc("data-"+p.Name, staticClass, apiv1.ReadWriteOnce), zonalPV("pv-"+p.Name, "a"))
	}
	for _, tc := range []struct {
		name     string
		pods     []*apiv1.Pod
		objs     []runtime.Object
		opts     []framework.Option
		realNode bool
		csiLimit int32 // of the template's CSINode; 0: none
		template *cloudprovider.NodeInfo
		check    func(want outcome) string
	}{
		{name: "profile default topology spread",
			pods:     concat(pods("a", 12, "100m"), pods("b", 7, "200m")),
			objs:     []runtime.Object{replicaSetOf("a"), replicaSetOf("b")},
			opts:     []framework.Option{framework.WithSchedulerConfigFile(spreadConfig)},
			realNode: true, template: templateInfo("4"),
			check: func(want outcome) string {
				if want.NodeCount != 12 {
					return fmt.Sprintf("the reference uses %d nodes, want one per pod of a (12)", want.NodeCount)
				}
				return ""
			}},
		{name: "pods without labels are not selected by default constraints",
			pods: pods("nolabels", 30, "100m", func(p *apiv1.Pod) { p.Labels = nil }),
			opts: []framework.Option{framework.WithSchedulerConfigFile(spreadConfig)}, realNode: true, template: templateInfo("4")},
		{name: "ReadWriteOncePod claim shared by a Deployment's pods",
			pods:     concat(pods("a", 10, "100m"), pods("rwop", 6, "100m", withClaim("shared")), pods("b", 10, "100m")),
			objs:     []runtime.Object{storageClass(csiClass, csiDriver), pvc("shared", csiClass, apiv1.ReadWriteOncePod)},
			template: templateInfo("4"),
			check: func(want outcome) string {
				if len(want.Unschedulable) != 5 {
					return fmt.Sprintf("the reference leaves %d pods unschedulable, want 5", len(want.Unschedulable))
				}
				return ""
			}},
		{name: "CSI attach limit of the template",
			pods:     concat(pods("a", 10, "100m"), ephemeralPods, pods("b", 10, "100m")),
			objs:     append([]runtime.Object{storageClass(csiClass, csiDriver)}, ephemeralClaims(ephemeralPods)...),
			csiLimit: 3, template: templateInfo("4"),
			check: func(want outcome) string {
				if want.NodeCount != 4 {
					return fmt.Sprintf("the reference uses %d nodes, want 4 (3 volumes each)", want.NodeCount)
				}
				return ""
			}},
		{name: "StatefulSet claims bound to zonal PVs in the template's zone",
			pods: concat(statefulPods, pods("a", 10, "300m")), objs: statefulObjs, template: inZone(templateInfo("4"), "a"),
			check: func(want outcome) string {
				if len(want.Scheduled) != 15 {
					return fmt.Sprintf("the reference schedules %d pods, want 15", len(want.Scheduled))
				}
				return ""
			}},
		{name: "StatefulSet claims bound to zonal PVs in another zone",
			pods: concat(statefulPods, pods("a", 10, "300m")), objs: statefulObjs, template: inZone(templateInfo("4"), "b"),
			check: func(want outcome) string {
				if len(want.Unschedulable) != 5 {
					return fmt.Sprintf("the reference leaves %d pods unschedulable, want the 5 with claims", len(want.Unschedulable))
				}
				return ""
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := newSimWith(t, tc.objs, tc.opts...)
			snap := sim.Snapshot()
			if tc.realNode {
				if err := snap.AddNode(full, filler); err != nil {
					t.Fatal(err)
				}
			}
			if tc.csiLimit > 0 {
				snap.SetCSINode(tc.template.Node.Name, csiNodeWithLimit(tc.template.Node.Name, tc.csiLimit))
			}
			waitForClaims(t, sim, tc.pods)
			limits := Limits{MaxNodes: 1000}
			groups := GroupPods(tc.pods)
			want := outcomeOf(referenceEstimate(t, sim, groups, tc.template, limits))
			if tc.check != nil {
				if msg := tc.check(want); msg != "" {
					t.Fatalf("the case does not test what it should: %s", msg)
				}
			}
			est, err := New(sim).Estimate(context.Background(), groups, tc.template, "ng", limits)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, outcomeOf(est)); diff != "" {
				t.Errorf("estimate differs from pod-by-pod placement (-want +got):\n%s", diff)
			}
			wantLen := 0
			if tc.realNode {
				wantLen = 1
			}
			if snap.Len() != wantLen || snap.Forked() {
				t.Errorf("the estimate left %d nodes in the snapshot", snap.Len())
			}
		})
	}
}
