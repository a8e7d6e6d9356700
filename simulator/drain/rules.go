package drain

import (
	"fmt"
	"time"

	apiv1 "k8s.io/api/core/v1"
)

// verdict is what one rule decides for one pod.
type verdict int

const (
	// undecided lets the next rule speak; a pod no rule decides is moved.
	undecided verdict = iota
	// leave keeps the pod on the node: it needs no new home.
	leave
	// move: the pod must fit elsewhere and be evicted.
	move
	// block forbids the node's removal.
	block
)

// outcome is a rule's answer; its zero value defers to the next rule, and
// reason and detail are set only for block.
type outcome struct {
	verdict verdict
	reason  BlockingReason
	detail  string
}

// blocked is the outcome of a rule that forbids the node's removal.
func blocked(reason BlockingReason, format string, args ...any) outcome {
	return outcome{verdict: block, reason: reason, detail: fmt.Sprintf(format, args...)}
}

// rule is one drainability check. It returns the zero outcome to defer to later rules.
type rule interface {
	check(pod *apiv1.Pod, env *classifyEnv) outcome
}

// classifyEnv is what rules may read besides the pod, for one Classify call.
type classifyEnv struct {
	now  time.Time
	pdbs *PDBs
}

// Rules applies the drainability rules in upstream's order:
//
//  1. mirror pods: left;
//  2. long-terminating pods: left;
//  3. replica count (only with SkipNodesWithCustomControllerPods): a missing
//     controller blocks (ControllerNotFound), a ReplicaSet or
//     ReplicationController below MinReplicaCount blocks (MinReplicasReached);
//  4. interrupting rules: DaemonSet pods are left, safe-to-evict "true" pods
//     are moved, terminal pods are left, safe-to-evict "on-completion" pods
//     block (BlockedByOnCompletion);
//  5. blocking rules: not replicated (NotReplicated, ControllerNotFound),
//     kube-system pods without a PDB (only with SkipNodesWithSystemPods),
//     safe-to-evict "false", local storage (only with
//     SkipNodesWithLocalStorage);
//  6. every pod still undecided is moved; with a PDBs budget, every moved pod
//     (safe-to-evict "true" ones included: the eviction API enforces PDBs
//     whatever the annotation says) spends one disruption of each PDB
//     selecting it, and blocks (NotEnoughPdb) when one has none left.
//
// Rules is read-only after NewRules and safe for concurrent use; a PDBs value
// is not, so give each goroutine its own Fork.
type Rules struct {
	listers Listers // NewPDBs reads the PDB lister
	chain   []rule
}

// NewRules builds the rule chain for opts; rules whose flag is off are left out.
func NewRules(opts Options, listers Listers) *Rules {
	r := &Rules{listers: listers}
	type step struct {
		rule    rule
		enabled bool
	}
	for _, s := range []step{
		{mirrorRule{}, true},
		{longTerminatingRule{maxGraceSec: opts.MaxGracefulTerminationSec}, true},
		{replicaCountRule{listers: listers, minReplicas: opts.MinReplicaCount}, opts.SkipNodesWithCustomControllerPods},
		// Interrupting rules: they decide for good before any blocking rule.
		{daemonSetRule{}, true},
		{safeToEvictRule{}, true},
		{terminalRule{}, true},
		{onCompletionRule{}, true},
		// Blocking rules.
		{replicatedRule{
			listers: listers,
			// With the flag on, the replica-count rule already looked the
			// controller up; without it, the lookup happens here.
			lookUp:                !opts.SkipNodesWithCustomControllerPods,
			customIsNotReplicated: opts.SkipNodesWithCustomControllerPods,
		}, true},
		{systemPodRule{timeout: opts.BlockingSystemPodDisruptionTimeout, pdbLister: listers.PodDisruptionBudgets}, opts.SkipNodesWithSystemPods},
		{notSafeToEvictRule{}, true},
		{localStorageRule{}, opts.SkipNodesWithLocalStorage},
	} {
		if s.enabled {
			r.chain = append(r.chain, s.rule)
		}
	}
	return r
}

// Classify sorts the pods of one node. toMove are the pods that must fit
// elsewhere (and be evicted); left are pods left on the node (DaemonSet,
// mirror, terminal, long-terminating). blocking is nil unless some pod forbids
// the removal: then it names the first such pod in pods' order and toMove and
// left are nil. With pdbs non-nil, a pod selected by a PDB with no disruption
// left blocks (NotEnoughPdb), and when nothing blocks the moved pods' use of
// each PDB is subtracted from pdbs; a blocked node spends nothing. With pdbs
// nil, budgets are not checked, and the kube-system rule reads the PDB lister.
func (r *Rules) Classify(pods []*apiv1.Pod, pdbs *PDBs, now time.Time) (toMove, left []*apiv1.Pod, blocking *BlockingPod) {
	env := &classifyEnv{now: now, pdbs: pdbs}
	spend := budgetSpend{}
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		o := r.decide(pod, env)
		if o.verdict == move && pdbs != nil {
			o = pdbs.reserve(pod, spend)
		}
		switch o.verdict {
		case block:
			return nil, nil, &BlockingPod{Pod: pod, Reason: o.reason, Detail: o.detail}
		case leave:
			left = append(left, pod)
		default:
			toMove = append(toMove, pod)
		}
	}
	if pdbs != nil {
		pdbs.commit(spend)
	}
	return toMove, left, nil
}

// decide runs the chain until a rule decides; undecided pods are moved.
func (r *Rules) decide(pod *apiv1.Pod, env *classifyEnv) outcome {
	for _, rl := range r.chain {
		if o := rl.check(pod, env); o.verdict != undecided {
			return o
		}
	}
	return outcome{verdict: move}
}
