package leaderlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// InstanceAnnotation names, on the Lease, the process that wrote it last.
const InstanceAnnotation = "cluster-autoscaler.kubernetes.io/leader-instance"

// OtherInstance is appended to the holder identity that Get reports when
// the Lease names this lock's identity but another process wrote it.
const OtherInstance = " (another process)"

// InstanceLock is a Lease lock whose holder identity is shared by every
// process of one host (upstream's identity: the hostname) and whose writes
// also name the process (InstanceAnnotation). A Lease held under this
// identity by another process, such as a second replica on the same host or
// a previous run whose Lease has not expired, is reported by Get as held by
// someone else, so that the elector waits for it instead of taking it as its
// own and two processes leading at once.
type InstanceLock struct {
	client    coordinationclient.LeasesGetter
	namespace string
	name      string
	identity  string
	instance  string
	recorder  resourcelock.EventRecorder
	lease     *coordinationv1.Lease // as last read or written
}

// NewInstanceLock returns the lock of the Lease namespace/name for the
// process instance (unique per process) of identity.
func NewInstanceLock(client coordinationclient.LeasesGetter, namespace, name, identity, instance string,
	recorder resourcelock.EventRecorder) (*InstanceLock, error) {
	if identity == "" || instance == "" {
		return nil, errors.New("a leader-election lock needs an identity and an instance")
	}
	return &InstanceLock{client: client, namespace: namespace, name: name, identity: identity,
		instance: instance, recorder: recorder}, nil
}

var _ resourcelock.Interface = (*InstanceLock)(nil)

// Get reads the Lease.
func (l *InstanceLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	lease, err := l.client.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, err
	}
	l.lease = lease
	rec := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	if rec.HolderIdentity == l.identity && lease.Annotations[InstanceAnnotation] != l.instance {
		rec.HolderIdentity += OtherInstance
	}
	raw, err := json.Marshal(*rec)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the leader-election record: %w", err)
	}
	return rec, raw, nil
}

// Create creates the Lease with ler, written by this process.
func (l *InstanceLock) Create(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace,
			Annotations: map[string]string{InstanceAnnotation: l.instance}},
		Spec: resourcelock.LeaderElectionRecordToLeaseSpec(&ler),
	}
	created, err := l.client.Leases(l.namespace).Create(ctx, lease, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	l.lease = created
	return nil
}

// Update writes ler over the Lease as last read (a conflict when it changed
// since), naming this process as the writer.
func (l *InstanceLock) Update(ctx context.Context, ler resourcelock.LeaderElectionRecord) error {
	if l.lease == nil {
		return errors.New("the Lease was neither read nor created before its update")
	}
	lease := l.lease.DeepCopy()
	lease.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&ler)
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[InstanceAnnotation] = l.instance
	updated, err := l.client.Leases(l.namespace).Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return err
	}
	l.lease = updated
	return nil
}

// RecordEvent records a LeaderElection event ("<identity> became leader")
// on the Lease, as client-go's own Lease lock does.
func (l *InstanceLock) RecordEvent(s string) {
	if l.recorder == nil || l.lease == nil {
		return
	}
	subject := &coordinationv1.Lease{ObjectMeta: l.lease.ObjectMeta}
	subject.Kind = "Lease"
	subject.APIVersion = coordinationv1.SchemeGroupVersion.String()
	l.recorder.Eventf(subject, apiv1.EventTypeNormal, "LeaderElection", "%s %s", l.identity, s)
}

// Describe names the Lease.
func (l *InstanceLock) Describe() string { return l.namespace + "/" + l.name }

// Identity is the holder identity this lock writes.
func (l *InstanceLock) Identity() string { return l.identity }
