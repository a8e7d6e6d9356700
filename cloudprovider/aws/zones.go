package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/klog/v2"
)

// subnetsRefusedRetry is how long DescribeSubnets is not called again after
// IAM refused it (a permission granted later is used from then on).
const subnetsRefusedRetry = 10 * time.Minute

// errSubnetsRefused marks a DescribeSubnets the autoscaler's IAM policy
// does not allow (upstream's documented policy lacks ec2:DescribeSubnets):
// zones then come from the groups' own AvailabilityZones.
var errSubnetsRefused = errors.New("ec2:DescribeSubnets is not allowed by the IAM policy")

// loadSubnets reads the zones of the subnets not known yet, in one call.
// When IAM refuses the call it returns errSubnetsRefused (logged once, not
// at each call) and is not called again for subnetsRefusedRetry.
func (p *Provider) loadSubnets(ctx context.Context, ids []string) error {
	c := p.facts
	now := p.clock.Now()
	c.mu.Lock()
	var missing []string
	seen := map[string]bool{}
	for _, id := range ids {
		if _, ok := c.subnets[id]; !ok && !seen[id] {
			seen[id] = true
			missing = append(missing, id)
		}
	}
	refused := now.Before(c.subnetsRefusedUntil)
	c.mu.Unlock()
	if len(missing) == 0 {
		return nil
	}
	if refused {
		return errSubnetsRefused
	}
	sort.Strings(missing)
	pages := ec2.NewDescribeSubnetsPaginator(p.ec2, &ec2.DescribeSubnetsInput{SubnetIds: missing},
		func(o *ec2.DescribeSubnetsPaginatorOptions) { o.StopOnDuplicateToken = true })
	for n := 0; pages.HasMorePages(); n++ {
		if n >= maxPages {
			return badDescription("describing subnets: more than %d pages", maxPages)
		}
		out, err := pages.NextPage(ctx)
		if err != nil {
			err = callError(fmt.Sprintf("describing subnets %v", missing), err, true)
			if isAccessDenied(err) {
				c.mu.Lock()
				c.subnetsRefusedUntil = now.Add(subnetsRefusedRetry)
				c.mu.Unlock()
				klog.FromContext(ctx).Info("DescribeSubnets refused by the IAM policy: the zones of templates and placeholders "+
					"are the groups' first Availability Zones; add ec2:DescribeSubnets for the first subnet's zone",
					"retryIn", subnetsRefusedRetry, "err", err)
				return fmt.Errorf("%w: %w", errSubnetsRefused, err)
			}
			return err
		}
		c.mu.Lock()
		for _, s := range out.Subnets {
			if id, z := deref(s.SubnetId), deref(s.AvailabilityZone); id != "" && z != "" {
				c.subnets[id] = z
			}
		}
		c.mu.Unlock()
	}
	return nil
}

// noteZoneFallback logs, once per group, that its template's zone is its
// first Availability Zone because its subnets could not be described.
func (p *Provider) noteZoneFallback(ctx context.Context, group, zone string) {
	c := p.facts
	c.mu.Lock()
	logged := c.zoneFallbackLogged[group]
	c.zoneFallbackLogged[group] = true
	c.mu.Unlock()
	if !logged {
		klog.FromContext(ctx).Info("Template zone taken from the Auto Scaling group's Availability Zones (DescribeSubnets refused)",
			"nodeGroup", group, "zone", zone)
	}
}
