package aws

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/autoscaling"
	"github.com/aws/smithy-go"
	"k8s.io/klog/v2"
)

// protectionBatch is how many instances one SetInstanceProtection call may
// name.
const protectionBatch = 50

// cancelCapacity lowers the group's desired capacity from d.Desired (d is a
// fresh description) to want, at least d.live(): it cancels capacity that
// no instance backs yet.
//
// AWS has no conditional SetDesiredCapacity. Should the group launch an
// instance between the description and the call (it retries the launches
// of that capacity at any moment), the call would leave it with more
// instances than wanted, and AWS would terminate some of its own choosing
// (the termination policy: possibly an old instance running pods). So the
// InService instances are protected from scale-in for the length of the
// call: an instance launched in that window, with no pod yet, is then the
// only kind AWS may pick. After the call a fresh description checks that no
// scale-in is pending (else the desired capacity goes back up to the
// instances the group has) before the protection the call added, and only
// that, is lifted. While an instance is still Pending (not protectable:
// protection starts when an instance is InService) nothing is cancelled; the
// caller retries in a later loop.
func (g *NodeGroup) cancelCapacity(ctx context.Context, d groupDesc, want int) error {
	logger := klog.FromContext(ctx)
	if want >= d.Desired {
		return nil
	}
	var protect []string
	for _, in := range d.Instances {
		switch {
		case in.terminating():
		case in.pending():
			return fmt.Errorf("not cancelling capacity of Auto Scaling group %q yet: instance %s is still %s, and AWS could pick it "+
				"if the group launched meanwhile; retried once it is in service", g.Id(), in.ID, in.Lifecycle)
		case !in.Protected:
			protect = append(protect, in.ID)
		}
	}
	if err := g.setProtection(ctx, protect, true); err != nil {
		return fmt.Errorf("protecting the instances of Auto Scaling group %q from scale-in before cancelling capacity; nothing cancelled: %w",
			g.Id(), err)
	}
	if err := g.setDesired(ctx, want, nil); err != nil {
		g.unprotect(ctx, protect, "the decrease failed")
		return err
	}
	logger.Info("Cancelled capacity not launched yet", "nodeGroup", g.Id(), "from", d.Desired, "to", want,
		"protectedMeanwhile", len(protect))
	after, err := g.p.describeOne(ctx, g.Id())
	if err != nil {
		logger.Error(err, "Could not check the Auto Scaling group after cancelling capacity; its instances stay protected from scale-in",
			"nodeGroup", g.Id(), "instances", protect)
		return nil
	}
	if live := after.live(); live > after.Desired {
		// The group launched in the window: keep what it has.
		if err := g.setDesired(ctx, live, nil); err != nil {
			logger.Error(err, "The Auto Scaling group launched while its capacity was cancelled, and raising it back failed; "+
				"its instances stay protected from scale-in", "nodeGroup", g.Id(), "instances", protect)
			return nil
		}
		logger.Info("The Auto Scaling group launched while its capacity was cancelled; its desired capacity follows its instances",
			"nodeGroup", g.Id(), "desired", live)
	}
	g.unprotect(ctx, protect, "capacity cancelled")
	return nil
}

// unprotect lifts the scale-in protection cancelCapacity added, even when
// ctx is cancelled; a failure is logged (the instances stay protected,
// which keeps them, and AWS from scaling them in).
func (g *NodeGroup) unprotect(ctx context.Context, ids []string, why string) {
	if err := g.setProtection(context.WithoutCancel(ctx), ids, false); err != nil {
		klog.FromContext(ctx).Error(err, "Lifting the scale-in protection added for a capacity cancellation failed; the instances stay protected",
			"nodeGroup", g.Id(), "instances", ids, "after", why)
	}
}

// setProtection sets the scale-in protection of the instances, in batches
// of 50. A failure part way undoes the batches done when protecting.
func (g *NodeGroup) setProtection(ctx context.Context, ids []string, protected bool) error {
	for start := 0; start < len(ids); start += protectionBatch {
		batch := ids[start:min(start+protectionBatch, len(ids))]
		g.p.beginWrite(g.Id())
		_, err := g.p.asg.SetInstanceProtection(ctx, &autoscaling.SetInstanceProtectionInput{
			AutoScalingGroupName: aws.String(g.Id()), InstanceIds: batch, ProtectedFromScaleIn: aws.Bool(protected)})
		g.p.endWrite(g.Id())
		g.p.invalidate(g.Id())
		if err == nil {
			continue
		}
		err = callError(fmt.Sprintf("setting the scale-in protection of %d instances of Auto Scaling group %q to %t", len(batch), g.Id(), protected), err, false)
		if isAccessDenied(err) {
			err = fmt.Errorf("%w (the autoscaler's IAM policy needs autoscaling:SetInstanceProtection)", err)
		}
		if protected && start > 0 {
			g.unprotect(ctx, ids[:start], "protecting failed part way")
		}
		return err
	}
	return nil
}

func isAccessDenied(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && (ae.ErrorCode() == "AccessDenied" || ae.ErrorCode() == "AccessDeniedException" ||
		ae.ErrorCode() == "UnauthorizedOperation")
}
