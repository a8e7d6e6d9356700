package processor

import (
	"fmt"
	"sort"
	"strings"
	"time"

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
	c := r.status.Conditions
	if l.p.ending == nil || len(r.state.nodes) == 0 || !provreq.IsConditionTrue(c, provreq.ConditionProvisioned) ||
		provreq.IsConditionTrue(c, provreq.ConditionFailed) || provreq.IsConditionTrue(c, provreq.ConditionCapacityRevoked) {
		return
	}
	if l.endingNodes == nil {
		l.endingNodes = l.p.ending()
		if l.endingNodes == nil {
			l.endingNodes = map[string]EndingCapacity{}
		}
	}
	var hit []string
	for n := range r.state.nodes {
		if _, ok := l.endingNodes[n]; ok {
			hit = append(hit, n)
		}
	}
	if len(hit) == 0 {
		return
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
}
