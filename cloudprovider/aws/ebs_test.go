package aws

import (
	"context"
	"testing"

	apiv1 "k8s.io/api/core/v1"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"

	"k8s.io/autoscaler/cluster-autoscaler/test/awsfake"
)

// ebsVolume is a PersistentVolume as the EBS CSI driver provisions it: its
// node affinity pins the driver's zone key.
func ebsVolume(zone string) *apiv1.PersistentVolume {
	return &apiv1.PersistentVolume{Spec: apiv1.PersistentVolumeSpec{
		PersistentVolumeSource: apiv1.PersistentVolumeSource{CSI: &apiv1.CSIPersistentVolumeSource{Driver: "ebs.csi.aws.com", VolumeHandle: "vol-1"}},
		NodeAffinity: &apiv1.VolumeNodeAffinity{Required: &apiv1.NodeSelector{NodeSelectorTerms: []apiv1.NodeSelectorTerm{{
			MatchExpressions: []apiv1.NodeSelectorRequirement{{Key: EBSZoneLabel, Operator: apiv1.NodeSelectorOpIn, Values: []string{zone}}},
		}}}},
	}}
}

// TestTemplateFitsEBSVolumesOfItsZone: a StatefulSet pod whose EBS volume
// is in us-east-1b can go only to a template node of a group in that zone,
// by the volume's node affinity on topology.ebs.csi.aws.com/zone (what the
// scheduler's VolumeBinding plugin checks); groups at zero, through the
// SDK against the fake, with and without DescribeSubnets.
func TestTemplateFitsEBSVolumesOfItsZone(t *testing.T) {
	for _, denySubnets := range []bool{false, true} {
		name := "DescribeSubnets allowed"
		if denySubnets {
			name = "DescribeSubnets refused"
		}
		t.Run(name, func(t *testing.T) {
			s := startFake(t)
			if denySubnets {
				s.Deny("DescribeSubnets")
			}
			s.AddGroup(awsfake.Group{Name: "in-a", Max: 3, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-a"}})
			s.AddGroup(awsfake.Group{Name: "in-b", Max: 3, LaunchTemplate: lt("$Default"), Subnets: []string{"subnet-b"}})
			p := newTestProvider(t, []string{"0:3:in-a", "0:3:in-b"}, nil)
			ctx := context.Background()
			if err := p.Refresh(ctx); err != nil {
				t.Fatal(err)
			}
			pv := ebsVolume("us-east-1b")
			for _, tc := range []struct {
				group string
				fits  bool
			}{{"in-a", false}, {"in-b", true}} {
				info, err := group(t, p, tc.group).TemplateNodeInfo(ctx)
				if err != nil {
					t.Fatal(err)
				}
				fits, err := corev1helpers.MatchNodeSelectorTerms(info.Node, pv.Spec.NodeAffinity.Required)
				if err != nil {
					t.Fatal(err)
				}
				if fits != tc.fits {
					t.Errorf("%s (labels %v): a volume in us-east-1b fits %t, want %t", tc.group, info.Node.Labels, fits, tc.fits)
				}
				if z, ebs := info.Node.Labels[apiv1.LabelTopologyZone], info.Node.Labels[EBSZoneLabel]; z == "" || ebs != z {
					t.Errorf("%s: %s=%q, %s=%q; want both the template's zone", tc.group, apiv1.LabelTopologyZone, z, EBSZoneLabel, ebs)
				}
			}
		})
	}
}
