package awsfake

import (
	"sort"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/google/go-cmp/cmp"
)

// protectionGroup adds group g with n InService instances launched one by
// one (oldest first in the returned IDs).
func protectionGroup(t *testing.T, s *Server, c clients, g Group, n int) []string {
	t.Helper()
	lt := s.AddLaunchTemplate(LaunchTemplate{Name: g.Name, DefaultVersion: 1, Versions: []LaunchTemplateVersion{{Number: 1, InstanceType: "m5.large"}}})
	g.LaunchTemplate, g.Max = &LaunchTemplateSpec{ID: lt}, 10
	s.AddGroup(g)
	var ids []string
	for i := 1; i <= n; i++ {
		setDesired(t, c, g.Name, i)
		for _, in := range s.Instances(g.Name) {
			if !containsString(ids, in.ID) {
				ids = append(ids, in.ID)
			}
		}
	}
	return ids
}

func setDesired(t *testing.T, c clients, group string, n int) {
	t.Helper()
	if _, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String(group), DesiredCapacity: aws.Int32(int32(n)),
	}); err != nil {
		t.Fatalf("SetDesiredCapacity(%s, %d): %v", group, n, err)
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// active returns the IDs of the group's Pending and InService instances,
// sorted.
func activeIDs(s *Server, group string) []string {
	var out []string
	for _, in := range s.Instances(group) {
		if in.Lifecycle == LifecyclePending || in.Lifecycle == LifecycleInService {
			out = append(out, in.ID)
		}
	}
	sort.Strings(out)
	return out
}

func TestScaleInSkipsProtectedInstancesAndFollowsThePolicy(t *testing.T) {
	s := startFake(t)
	c := sdkClients(t, s)
	ids := protectionGroup(t, s, c, Group{Name: "old-first", TerminationPolicies: []string{"OldestInstance"}}, 4)
	if _, err := c.asg.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{
		AutoScalingGroupName: aws.String("old-first"), InstanceIds: ids[:1], ProtectedFromScaleIn: aws.Bool(true),
	}); err != nil {
		t.Fatalf("SetInstanceProtection: %v", err)
	}
	out, err := c.asg.DescribeAutoScalingGroups(t.Context(), &autoscaling.DescribeAutoScalingGroupsInput{AutoScalingGroupNames: []string{"old-first"}})
	if err != nil {
		t.Fatal(err)
	}
	protected := map[string]bool{}
	for _, in := range out.AutoScalingGroups[0].Instances {
		protected[aws.ToString(in.InstanceId)] = aws.ToBool(in.ProtectedFromScaleIn)
	}
	if want := map[string]bool{ids[0]: true, ids[1]: false, ids[2]: false, ids[3]: false}; !cmp.Equal(protected, want) {
		t.Fatalf("ProtectedFromScaleIn as described: %v, want %v", protected, want)
	}
	if got := out.AutoScalingGroups[0].TerminationPolicies; !cmp.Equal(got, []string{"OldestInstance"}) {
		t.Errorf("TerminationPolicies %v, want [OldestInstance]", got)
	}

	// OldestInstance: the oldest unprotected go first.
	setDesired(t, c, "old-first", 2)
	want := []string{ids[0], ids[3]}
	sort.Strings(want)
	if got := activeIDs(s, "old-first"); !cmp.Equal(got, want) {
		t.Errorf("after lowering to 2 with the oldest protected: active %v, want %v (the protected oldest and the newest)", got, want)
	}
	// With every active instance protected, the desired capacity goes down
	// but nothing is terminated.
	if _, err := c.asg.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{
		AutoScalingGroupName: aws.String("old-first"), InstanceIds: []string{ids[3]}, ProtectedFromScaleIn: aws.Bool(true),
	}); err != nil {
		t.Fatalf("SetInstanceProtection: %v", err)
	}
	setDesired(t, c, "old-first", 0)
	if got := activeIDs(s, "old-first"); !cmp.Equal(got, want) {
		t.Errorf("desired 0, all protected: active %v, want %v kept", got, want)
	}
	// Lifting the protection lets the pending scale-in happen.
	if _, err := c.asg.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{
		AutoScalingGroupName: aws.String("old-first"), InstanceIds: []string{ids[3]}, ProtectedFromScaleIn: aws.Bool(false),
	}); err != nil {
		t.Fatalf("SetInstanceProtection: %v", err)
	}
	if got := activeIDs(s, "old-first"); !cmp.Equal(got, []string{ids[0]}) {
		t.Errorf("after unprotecting %s: active %v, want only the still protected %s", ids[3], got, ids[0])
	}

	// Default: the newest go first.
	ids = protectionGroup(t, s, c, Group{Name: "default", NewInstancesProtectedFromScaleIn: false}, 3)
	setDesired(t, c, "default", 1)
	if got := activeIDs(s, "default"); !cmp.Equal(got, []string{ids[0]}) {
		t.Errorf("Default policy, lowered to 1: active %v, want the oldest %s", got, ids[0])
	}
	// New instances of a group that protects them are protected.
	ids = protectionGroup(t, s, c, Group{Name: "protect-new", NewInstancesProtectedFromScaleIn: true}, 2)
	setDesired(t, c, "protect-new", 0)
	want = append([]string(nil), ids...)
	sort.Strings(want)
	if got := activeIDs(s, "protect-new"); !cmp.Equal(got, want) {
		t.Errorf("NewInstancesProtectedFromScaleIn, lowered to 0: active %v, want %v kept", got, want)
	}
}

func TestSetInstanceProtectionValidates(t *testing.T) {
	s := startFake(t)
	c := sdkClients(t, s, noRetries)
	ids := protectionGroup(t, s, c, Group{Name: "a"}, 1)
	protectionGroup(t, s, c, Group{Name: "b"}, 0)
	tooMany := make([]string, maxProtectionIDs+1)
	for i := range tooMany {
		tooMany[i] = ids[0]
	}
	for _, tc := range []struct {
		name, group string
		ids         []string
	}{
		{"instance of another group", "b", ids},
		{"unknown instance", "a", []string{"i-00000000000000000"}},
		{"unknown group", "nope", ids},
		{"more than 50", "a", tooMany},
	} {
		_, err := c.asg.SetInstanceProtection(t.Context(), &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String(tc.group), InstanceIds: tc.ids, ProtectedFromScaleIn: aws.Bool(true),
		})
		if code := apiErrorCode(err); code != "ValidationError" {
			t.Errorf("%s: error %v (code %q), want ValidationError", tc.name, err, code)
		}
	}
	if in, _ := s.Instance(ids[0]); in.ProtectedFromScaleIn {
		t.Errorf("a refused call protected %s", ids[0])
	}
}

func TestBeforeCallAndDeny(t *testing.T) {
	s := startFake(t)
	c := sdkClients(t, s, noRetries)
	protectionGroup(t, s, c, Group{Name: "g"}, 0)
	var seen []int
	s.BeforeCall("SetDesiredCapacity", func() { seen = append(seen, s.GroupState("g").Desired) })
	setDesired(t, c, "g", 2)
	if !cmp.Equal(seen, []int{0}) {
		t.Errorf("BeforeCall saw desired %v, want [0] (run once, before the call changed it)", seen)
	}
	s.Deny("SetDesiredCapacity")
	_, err := c.asg.SetDesiredCapacity(t.Context(), &autoscaling.SetDesiredCapacityInput{
		AutoScalingGroupName: aws.String("g"), DesiredCapacity: aws.Int32(3),
	})
	if code := apiErrorCode(err); code != "AccessDenied" {
		t.Errorf("denied SetDesiredCapacity: %v (code %q), want AccessDenied", err, code)
	}
	if got := s.GroupState("g").Desired; got != 2 {
		t.Errorf("desired %d after a denied call, want 2", got)
	}
	s.Deny()
	setDesired(t, c, "g", 3)
}
