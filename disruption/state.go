package disruption

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	apiv1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// StateConfigMap holds the plans in flight and the nodes in cooldown; it
// keeps the name of the versions that only healed, so that their heals are
// resumed after an upgrade.
const StateConfigMap = "cluster-autoscaler-healing"

// Phases of a plan (a heal, or any other disruption), in order.
const (
	PhaseStarting  = "Starting"  // group and size checks, then the heal_start hooks
	PhaseSurging   = "Surging"   // cordoned; the replacement asked for first, waited for
	PhaseDraining  = "Draining"  // cordoned and tainted, pods evicted
	PhaseDeleting  = "Deleting"  // the instance deleted by name
	PhaseFencing   = "Fencing"   // pods were left on a node that is not Ready: waiting until its instance is gone
	PhaseReplacing = "Replacing" // waiting for the replacement to be Ready
	// PhaseFinishing: the heal_end hooks, called once for every heal that
	// called heal_start, whatever its outcome; then the record goes.
	PhaseFinishing = "Finishing"
	// PhaseRestoring: the heal has ended without replacing the node (failed
	// or cancelled); the node's own state is given back, then heal_end (if
	// owed) and the record goes.
	PhaseRestoring = "Restoring"
)

// Outcomes of a heal, as heal_end hooks are told (HookRequest.Outcome).
const (
	OutcomeHealed    = "healed"    // the node was replaced and its replacement is Ready
	OutcomeRestored  = "restored"  // the heal failed before removing the node, which got its own state back
	OutcomeCancelled = "cancelled" // the node recovered before its drain and got its own state back
	OutcomeFailed    = "failed"    // the heal failed; the node was removed, or could not be given its state back
)

// healScaleDownDisabled is the value a heal writes to the scale-down-disabled
// annotation; restore reverts the annotation only while it still holds it.
const healScaleDownDisabled = "true"

// nodeBefore is what a heal changes on its node, as it was before the heal
// touched it: a heal that ends without removing the node puts back exactly
// this, never clearing what the operator had set, and only where the node
// still holds what the heal wrote (unschedulable, the annotation set to
// healScaleDownDisabled): an operator's change made while the heal ran stays.
type nodeBefore struct {
	Unschedulable bool `json:"unschedulable"`
	// ScaleDownDisabled is the scale-down-disabled annotation's value; nil
	// when the node had none.
	ScaleDownDisabled *string `json:"scaleDownDisabled,omitempty"`
}

// ending is how a plan that did not remove its nodes ended.
type ending struct {
	Result  string `json:"result"` // failed or cancelled
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Outcome is what heal_end is told (Outcome*); set once the end is
	// final (empty while the nodes are being given back).
	Outcome string `json:"outcome,omitempty"`
}

// member is one node of a plan, with what the plan did to it.
type member struct {
	Node       string `json:"node"`
	Group      string `json:"group"`
	ProviderID string `json:"providerID"`
	// Instance is the id, as the group lists it, of the node's instance
	// when the plan deleted it (cloudprovider.Identify): the fence waits
	// until the group no longer lists it. Empty in records of older
	// versions and when the provider could not name it.
	Instance string `json:"instance,omitempty"`
	// Before is the node's state before the plan cordoned it (nil: not
	// touched yet); it is recorded before the cordon.
	Before *nodeBefore `json:"before,omitempty"`
	// DeleteIssued: DeleteNodes returned for the node; it is never asked again.
	DeleteIssued bool `json:"deleteIssued,omitempty"`
	// Fence: pods were left on a node that is not Ready; the node may still
	// run them, so its instance is deleted (and seen gone from its group)
	// before anything clears them.
	Fence bool `json:"fence,omitempty"`
	// OutOfService: the fenced node carries node.kubernetes.io/out-of-service,
	// so Kubernetes removes the pods it can no longer run.
	OutOfService bool `json:"outOfService,omitempty"`
}

// replacement is capacity a plan asks for: Count nodes of Group.
type replacement struct {
	Group string `json:"group"`
	Count int    `json:"count"`
	// ReadyBefore counts the group's Ready nodes, the plan's nodes and the
	// nodes being disrupted aside, when the plan started: the replacement
	// is Ready when there are Count more.
	ReadyBefore int `json:"readyBefore"`
	// TargetBefore is the group's target size just before the replacement
	// was asked for (nil: not asked yet): a restart that finds the target
	// above it knows the increase went through.
	TargetBefore *int `json:"targetBefore,omitempty"`
	// Increased: the replacement was asked for (IncreaseSize).
	Increased bool `json:"increased"`
	// Known names the group's nodes when the replacement was asked for
	// (every reason but Unhealthy): a Ready node of the group not among
	// them is a replacement, each taken by one plan, the oldest first.
	// Nil in heals, which count Ready nodes against ReadyBefore.
	Known []string `json:"known"`
}

// plan is one disruption in flight: its nodes go for Reason, after its
// replacement (if any) is Ready. It is keyed by its first node's name.
type plan struct {
	// Node and Group are the first node's (the record's key), kept at the
	// top for the status and for records of older versions.
	Node  string `json:"node"`
	Group string `json:"group"`
	// For is the disruption reason; records of older versions have none
	// and are Unhealthy (heals).
	For   Reason    `json:"for,omitempty"`
	Nodes []*member `json:"nodes,omitempty"`
	// Replacements is the capacity asked for (healing: the node's own
	// group, one node).
	Replacements []*replacement `json:"replacements,omitempty"`
	// Reason says why, for events and hooks ("<kind>: <why>" for heals).
	Reason     string    `json:"reason"`
	Phase      string    `json:"phase"`
	Started    time.Time `json:"started"`
	PhaseSince time.Time `json:"phaseSince"`
	// SavingPerHour is the candidate's estimated saving (0: unknown).
	SavingPerHour float64 `json:"savingPerHour,omitempty"`
	ControlPlane  bool    `json:"controlPlane,omitempty"`
	// Kind is what triggered a heal: "annotation", or the policy's
	// condition type.
	Kind string `json:"kind,omitempty"`
	// StartCalled: the heal passed its checks and its heal_start hooks were
	// called (it is recorded before the call): heal_end is owed, whatever
	// the outcome, and is called exactly once (Finishing).
	StartCalled bool `json:"startCalled,omitempty"`
	// StartHooked: the heal_start hooks answered (they are not called again).
	StartHooked bool `json:"startHooked,omitempty"`
	// DrainStarted: the plan reached Draining; a voluntary plan is no
	// longer cancelled when its source stops proposing it.
	DrainStarted bool `json:"drainStarted,omitempty"`
	// Replaced: the replacement was seen Ready before the drain (a plan
	// other than a heal does not wait for it again after the deletion).
	Replaced bool `json:"replaced,omitempty"`
	// LastError is the last transient error met in the current phase, for
	// the message of a phase that runs out of time.
	LastError string `json:"lastError,omitempty"`
	// End is set when the plan ended without removing its nodes (or, for
	// heal_end in Finishing, failed after removing them); nil in Finishing
	// means the nodes were replaced.
	End *ending `json:"end,omitempty"`

	legacy
}

// legacy holds the fields of a heal recorded by an older version (one
// node, one replacement, at the top of the record); load moves them into
// Nodes and Replacements, and they are not written again.
type legacy struct {
	ProviderID   string      `json:"providerID,omitempty"`
	Instance     string      `json:"instance,omitempty"`
	Before       *nodeBefore `json:"before,omitempty"`
	DeleteIssued bool        `json:"deleteIssued,omitempty"`
	Fence        bool        `json:"fence,omitempty"`
	OutOfService bool        `json:"outOfService,omitempty"`
	ReadyBefore  int         `json:"readyBefore,omitempty"`
	TargetBefore *int        `json:"targetBefore,omitempty"`
	Increased    bool        `json:"increased,omitempty"`
}

// upgrade moves a record of an older version into the current form.
func (r *plan) upgrade() {
	if r.For == "" {
		r.For = Unhealthy
	}
	if len(r.Nodes) == 0 && r.Node != "" {
		l := r.legacy
		r.Nodes = []*member{{Node: r.Node, Group: r.Group, ProviderID: l.ProviderID, Instance: l.Instance, Before: l.Before,
			DeleteIssued: l.DeleteIssued, Fence: l.Fence, OutOfService: l.OutOfService}}
		r.Replacements = []*replacement{{Group: r.Group, Count: 1, ReadyBefore: l.ReadyBefore, TargetBefore: l.TargetBefore,
			Increased: l.Increased}}
	}
	r.legacy = legacy{}
}

// endOwed reports whether the heal called heal_start and so must call
// heal_end (records written before StartCalled existed: once heal_start
// answered).
func (r *plan) endOwed() bool { return r.StartCalled || r.StartHooked }

// kind is what triggered the heal (records written before Kind existed
// carry it at the start of Reason).
func (r *plan) kind() string {
	if r.Kind != "" {
		return r.Kind
	}
	k, _, _ := strings.Cut(r.Reason, ":")
	return k
}

// voluntary reports whether the plan's reason is one the cluster chose
// (not a failure nor a provider's notice): such plans honour protections
// and are cancelled when their reason no longer holds before the drain.
func voluntary(r Reason) bool { return r != Unhealthy && r != Interrupted && r != ReservationEnding }

// deleteIssued reports whether any node of the plan was deleted.
func (r *plan) deleteIssued() bool {
	for _, m := range r.Nodes {
		if m.DeleteIssued {
			return true
		}
	}
	return false
}

// state is the ConfigMap's content.
type state struct {
	// Heals are the plans in flight, every reason, by their first node
	// (the key keeps its name from the versions that only healed).
	Heals    map[string]*plan     `json:"heals"`
	Cooldown map[string]time.Time `json:"cooldown"` // node name -> healing allowed again after
	// ScaleDown are scale-down's removals in flight (the delete-only
	// reasons, deleteonly.go), by node.
	ScaleDown map[string]*removal `json:"scaleDown,omitempty"`
}

type store struct {
	client    kubernetes.Interface
	namespace string
	exists    bool
	rv        string
}

func (s *store) load(ctx context.Context) (*state, error) {
	st := &state{Heals: map[string]*plan{}, Cooldown: map[string]time.Time{}}
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, StateConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		s.exists, s.rv = false, ""
		return st, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", s.namespace, StateConfigMap, err)
	}
	s.exists, s.rv = true, cm.ResourceVersion
	if data := cm.Data["state"]; data != "" {
		if err := json.Unmarshal([]byte(data), st); err != nil {
			return nil, fmt.Errorf("ConfigMap %s/%s: %w", s.namespace, StateConfigMap, err)
		}
	}
	if st.Heals == nil {
		st.Heals = map[string]*plan{}
	}
	for _, r := range st.Heals {
		r.upgrade()
	}
	if st.Cooldown == nil {
		st.Cooldown = map[string]time.Time{}
	}
	return st, nil
}

// save writes st over the version load read; a conflict (another writer)
// is returned, and the caller reloads in its next loop.
func (s *store) save(ctx context.Context, st *state) error {
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	cm := &apiv1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: StateConfigMap, Namespace: s.namespace, ResourceVersion: s.rv},
		Data: map[string]string{"state": string(data)}}
	var out *apiv1.ConfigMap
	if s.exists {
		out, err = s.client.CoreV1().ConfigMaps(s.namespace).Update(ctx, cm, metav1.UpdateOptions{})
		if apierrors.IsNotFound(err) {
			// Deleted behind our back (by hand, or a namespace clean-up):
			// the heals in flight are still ours, so write them anew.
			s.exists, cm.ResourceVersion = false, ""
		}
	}
	if !s.exists {
		out, err = s.client.CoreV1().ConfigMaps(s.namespace).Create(ctx, cm, metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing ConfigMap %s/%s: %w", s.namespace, StateConfigMap, err)
	}
	s.exists, s.rv = true, out.ResourceVersion
	return nil
}
