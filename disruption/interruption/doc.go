// Package interruption owns the interrupted reason of the disruption engine
// (issue 42): a provider that learns ahead of time that instances will go
// (cloudprovider.InterruptionSource: AWS's Spot interruption warnings,
// rebalance recommendations, state changes and scheduled changes, read from
// an SQS queue) hands its notices here, and each notice whose instance is
// surely a Node of a managed group (cloudprovider.Identify, SureMatch)
// becomes a Candidate for disruption.Interrupted: that Node, replaced by one
// new node of its own group, unless the provider avoids that group
// (cloudprovider.CapacityAvoider: all of its Spot capacity was interrupted
// lately); then the Node goes without a replacement and its pods get the
// capacity the scale-up picks, the group being held backed off. The engine treats the reason as involuntary
// (no protection, no budget holds it back), so the replacement is asked for
// in the loop that sees the notice and the node is cordoned and drained with
// the PodDisruptionBudgets.
//
// Two halves: Source.Run polls the provider in the background (bounded,
// short waits), counts the notices by kind and action, acknowledges the
// notices that were acted on and triggers a loop when a new notice comes;
// Source.Propose is the pure decision the engine asks every loop (it calls
// no provider write and not the API server; the acknowledgements it decides
// are sent by Run). A notice is acknowledged once its node is in flight for
// the interrupted reason, or once no Node is the instance any more (gone);
// a notice whose instance may be a Node but not surely waits.
//
// Besides the contract (disruption, processors) and cloudprovider it must
// not import the engine's code, core/, scaledown/ or a provider.
package interruption
