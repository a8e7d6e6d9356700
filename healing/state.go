package healing

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

// StateConfigMap holds the heals in flight and the nodes in cooldown.
const StateConfigMap = "cluster-autoscaler-healing"

// Phases of a heal, in order.
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

// ending is how a heal that did not replace its node ended.
type ending struct {
	Result  string `json:"result"` // failed or cancelled
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// Outcome is what heal_end is told (Outcome*); set once the end is
	// final (empty while the node is being given back).
	Outcome string `json:"outcome,omitempty"`
}

// heal is one heal in flight.
type heal struct {
	Node       string `json:"node"`
	Group      string `json:"group"`
	ProviderID string `json:"providerID"`
	// Instance is the id, as the group lists it, of the node's instance
	// when the heal deleted it (cloudprovider.Identify): the fence waits
	// until the group no longer lists it. Empty in records of older
	// versions and when the provider could not name it.
	Instance   string    `json:"instance,omitempty"`
	Reason     string    `json:"reason"`
	Phase      string    `json:"phase"`
	Started    time.Time `json:"started"`
	PhaseSince time.Time `json:"phaseSince"`
	// ReadyBefore counts the group's Ready nodes, the healed one aside,
	// when the heal started: the replacement is Ready when there are more.
	ReadyBefore int `json:"readyBefore"`
	// TargetBefore is the group's target size just before the replacement
	// was asked for (nil: not asked yet): a restart that finds the target
	// above it knows the increase went through.
	TargetBefore *int `json:"targetBefore,omitempty"`
	// Increased: the replacement was asked for (IncreaseSize), before the
	// removal when the group had room, else after it.
	Increased bool `json:"increased"`
	// DeleteIssued: DeleteNodes returned for the node; it is never asked again.
	DeleteIssued bool `json:"deleteIssued"`
	ControlPlane bool `json:"controlPlane,omitempty"`
	// Kind is what triggered the heal: "annotation", or the policy's
	// condition type.
	Kind string `json:"kind,omitempty"`
	// Before is the node's state before the heal cordoned it (nil: not
	// touched yet); it is recorded before the cordon.
	Before *nodeBefore `json:"before,omitempty"`
	// StartCalled: the heal passed its checks and its heal_start hooks were
	// called (it is recorded before the call): heal_end is owed, whatever
	// the outcome, and is called exactly once (Finishing).
	StartCalled bool `json:"startCalled,omitempty"`
	// StartHooked: the heal_start hooks answered (they are not called again).
	StartHooked bool `json:"startHooked,omitempty"`
	// Fence: pods were left on a node that is not Ready; the node may still
	// run them, so its instance is deleted (and seen gone from its group)
	// before anything clears them.
	Fence bool `json:"fence,omitempty"`
	// OutOfService: the fenced node carries node.kubernetes.io/out-of-service,
	// so Kubernetes removes the pods it can no longer run.
	OutOfService bool `json:"outOfService,omitempty"`
	// LastError is the last transient error met in the current phase, for
	// the message of a phase that runs out of time.
	LastError string `json:"lastError,omitempty"`
	// End is set when the heal ended without replacing the node (or, for
	// heal_end in Finishing, failed after removing it); nil in Finishing
	// means the node was replaced.
	End *ending `json:"end,omitempty"`
}

// endOwed reports whether the heal called heal_start and so must call
// heal_end (records written before StartCalled existed: once heal_start
// answered).
func (r *heal) endOwed() bool { return r.StartCalled || r.StartHooked }

// kind is what triggered the heal (records written before Kind existed
// carry it at the start of Reason).
func (r *heal) kind() string {
	if r.Kind != "" {
		return r.Kind
	}
	k, _, _ := strings.Cut(r.Reason, ":")
	return k
}

// state is the ConfigMap's content.
type state struct {
	Heals    map[string]*heal     `json:"heals"`
	Cooldown map[string]time.Time `json:"cooldown"` // node name -> healing allowed again after
}

type store struct {
	client    kubernetes.Interface
	namespace string
	exists    bool
	rv        string
}

func (s *store) load(ctx context.Context) (*state, error) {
	st := &state{Heals: map[string]*heal{}, Cooldown: map[string]time.Time{}}
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
		st.Heals = map[string]*heal{}
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
