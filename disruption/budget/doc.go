// Package budget owns the disruption budgets (issue 40): how many of a node
// group's nodes the disruption engine may disrupt at once, per node group and
// per reason, with optional schedules. It follows the semantics of
// Karpenter's NodePool disruption budgets in the node-group model: a budget
// is a count or a percentage of the group's nodes, limited to some reasons
// and some groups (a regular expression on the group id), and, with a cron
// schedule and a duration, active only for that duration from each time of
// the schedule (UTC; there is no daylight saving time to reckon with).
//
// The limit for a reason in a group is the smallest of the active budgets
// that match both, as in Karpenter, where the most restrictive budget wins.
// A percentage rounds up (10% of 11 nodes is 2), as Karpenter's does. The
// engine's Allowed is that limit less the group's nodes already disrupting
// for any reason; the engine should count there, as Karpenter does, the
// group's nodes that are being deleted and those not Ready.
//
// Voluntary and involuntary reasons. Empty, underutilized, consolidatable,
// drifted and expired are voluntary: the autoscaler chooses them, and when no
// active budget matches one of them in a group, the default of 10% of the
// group's nodes holds (Karpenter's default). A budget given without reasons
// applies to the voluntary reasons only, as Karpenter's budgets govern only
// voluntary disruption. Unhealthy (node healing) and interrupted (the
// provider takes the instance back) are not chosen: holding them back does
// not keep a node that is failing or going, it only delays its replacement.
// So neither the default nor a budget without reasons applies to them; a
// budget applies to them only when it names them (reasons=unhealthy), and
// then it works as any other, schedules included. Without such a budget the
// limit for unhealthy is the group's size, and healing's own breaker (the
// share of a group's nodes it may replace at once, and its cluster-wide stop
// when too many nodes fail together) remains what protects the cluster: a
// budget can tighten healing, the default never blocks it.
//
// Scale-down's reasons (empty, underutilized: the delete-only case, which
// scale-down's actuator carries out with upstream's flags) are voluntary,
// but they too are held back only by a budget that names them
// (reasons=underutilized): neither the default nor a budget without reasons
// applies to them, so that scale-down keeps upstream's limits
// (--max-scale-down-parallelism, --max-drain-parallelism) unless an operator
// writes one, as "no scale-down of busy nodes during business hours".
//
// Where this differs from Karpenter: a NodePool with budgets, none of them
// active, is unbounded in Karpenter; here the default holds whenever no
// active budget matches a voluntary reason, so that a window of "nodes=0"
// during business hours does not lift every limit outside it. Write
// "nodes=100%" to lift the limit outside a window.
//
// The flag syntax (Parse) is one budget per value, key=value fields
// separated by ';':
//
//	nodes=10%;reasons=drifted,expired;node-groups=^spot-;schedule=0 9 * * 1-5;duration=8h
//	nodes=0;reasons=consolidatable,underutilized;schedule=0 9 * * 1-5;duration=8h
//
// A node group may carry its own budgets (its DisruptionBudget option, read
// through NodeGroup.GetOptions by the builder): PerGroup lets them take the
// place of the flag's for that group, for the reasons they name, while they
// are active; ParseGroup reads such a value (budgets separated by '|').
//
// The package is pure (no clock of its own: now is passed in; no I/O: the
// groups' values come through an injected function). It imports the
// disruption contract (for Reason), the cron parser and klog only; it
// must not import directly the engine's code, the cloud provider, core/,
// scaledown/ or client-go. Through the contract it depends on processors/
// and, transitively, on config/: config/ cannot import it, so Options keep
// the flag's raw values and the command line or the builder parses them.
package budget
