package builder

import (
	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/disruption/lifecycle"
	"k8s.io/autoscaler/cluster-autoscaler/provreq/processor"
)

// reservationEndSource is the disruption engine's source for the nodes of
// EC2 Capacity Blocks about to end (--aws-capacity-block-drain-before);
// nil unless the aws provider is used and the flag is above 0.
func reservationEndSource(opts config.Options, in Inputs) *lifecycle.ReservationEnd {
	if in.Provider == nil || opts.CloudProvider != "aws" || opts.AWSCapacityBlockDrainBefore <= 0 {
		return nil
	}
	return lifecycle.NewReservationEnd(in.Provider, opts.AWSCapacityBlockDrainBefore)
}

// endingCapacity adapts the source's ending nodes for the
// ProvisioningRequest processor, which revokes the requests on them.
func endingCapacity(s *lifecycle.ReservationEnd) processor.Option {
	return processor.WithEndingCapacity(func() map[string]processor.EndingCapacity {
		ending := s.Ending()
		if len(ending) == 0 {
			return nil
		}
		out := make(map[string]processor.EndingCapacity, len(ending))
		for n, e := range ending {
			out[n] = processor.EndingCapacity{ID: e.ID, End: e.End}
		}
		return out
	})
}
