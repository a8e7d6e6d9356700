package processor

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"

	"k8s.io/autoscaler/cluster-autoscaler/provreq"
)

// ReasonCapacityBlockEnding is CapacityRevoked's reason once a node the
// request was provisioned on runs on reserved capacity that ends soon (an
// EC2 Capacity Block for ML inside its drain window): the node is drained
// before the end.
const ReasonCapacityBlockEnding = "CapacityBlockEnding"

// EndingCapacity is the reserved capacity a node runs on, ending at End.
type EndingCapacity struct {
	// ID names the reservation (the Capacity Block's ID).
	ID  string
	End time.Time
}

// EndingNodes names the nodes whose reserved capacity ends soon (their
// drain has begun or is about to), by node name. It is called once per
// loop; safe to call from the loop's goroutine.
type EndingNodes func() map[string]EndingCapacity

// WithEndingCapacity makes a provisioned request whose nodes (those its
// atomic scale-up made) run on ending reserved capacity CapacityRevoked,
// reason CapacityBlockEnding.
func WithEndingCapacity(f EndingNodes) Option { return func(p *Processor) { p.ending = f } }

// revokeEnding revokes r's capacity when one of its nodes is on reserved
// capacity that ends soon: a request Provisioned and not failed nor
// revoked already, its booking consumed or not (the workload running on
// the nodes is what a queue such as Kueue evicts on CapacityRevoked); the
// nodes are those it keeps (r.state.nodes).
func (l *Loop) revokeEnding(r *request) {
	if len(r.state.nodes) == 0 {
		return
	}
	nodes := make([]string, 0, len(r.state.nodes))
	for n := range r.state.nodes {
		nodes = append(nodes, n)
	}
	l.revokeOnEnding(r, nodes)
}

// revokeOnEnding revokes r's capacity when one of nodes (those it was
// provisioned on, or those the loop booked its pods on) is on reserved
// capacity that ends soon, under the same conditions as revokeEnding; it
// reports whether it did.
func (l *Loop) revokeOnEnding(r *request, nodes []string) bool {
	c := r.status.Conditions
	if l.p.ending == nil || len(nodes) == 0 || !provreq.IsConditionTrue(c, provreq.ConditionProvisioned) ||
		provreq.IsConditionTrue(c, provreq.ConditionFailed) || provreq.IsConditionTrue(c, provreq.ConditionCapacityRevoked) {
		return false
	}
	if l.endingNodes == nil {
		l.endingNodes = l.p.ending()
		if l.endingNodes == nil {
			l.endingNodes = map[string]EndingCapacity{}
		}
	}
	var hit []string
	for _, n := range nodes {
		if _, ok := l.endingNodes[n]; ok {
			hit = append(hit, n)
		}
	}
	if len(hit) == 0 {
		return false
	}
	sort.Strings(hit)
	byBlock := map[EndingCapacity][]string{}
	var blocks []EndingCapacity
	for _, n := range hit {
		e := l.endingNodes[n]
		if byBlock[e] == nil {
			blocks = append(blocks, e)
		}
		byBlock[e] = append(byBlock[e], n)
	}
	sort.Slice(blocks, func(i, j int) bool {
		if !blocks[i].End.Equal(blocks[j].End) {
			return blocks[i].End.Before(blocks[j].End)
		}
		return blocks[i].ID < blocks[j].ID
	})
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		parts = append(parts, fmt.Sprintf("Capacity Block %s ends at %s (nodes %s)", b.ID, b.End.UTC().Format(time.RFC3339),
			strings.Join(byBlock[b], ", ")))
	}
	l.set(r, provreq.ConditionCapacityRevoked, true, ReasonCapacityBlockEnding, fmt.Sprintf(
		"%s: the request's nodes there are drained before the end; the capacity is revoked.", strings.Join(parts, "; ")))
	return true
}

// NodePlacer is a Capacity that also tells on which nodes it placed the
// pods (scaleup.Session): a check-capacity request's booking on reserved
// capacity that ends soon is then revoked, the block named.
type NodePlacer interface {
	PlaceOn(ctx context.Context, sets [][]*apiv1.Pod, realOnly bool) (rest []*apiv1.Pod, on []string)
}
