package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/google/uuid"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/autoscaler/cluster-autoscaler/config"
	"k8s.io/autoscaler/cluster-autoscaler/leaderlease"
)

// errLostLease ends the process when another replica took the lease.
var errLostLease = errors.New("lost the leader-election lease")

// runWithLeaderElection runs act while this replica holds the Lease. It
// returns nil when ctx ends (releasing the Lease) and errLostLease when the
// Lease was lost while ctx was still live.
func runWithLeaderElection(ctx context.Context, opts config.Options, client kubernetes.Interface,
	act func(context.Context) error) error {
	logger := klog.FromContext(ctx)
	// Fail early on a client that cannot reach the API server, as upstream does.
	if _, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return fmt.Errorf("checking the API server connection: %w", err)
	}
	hostname, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("reading the hostname for the leader-election identity: %w", err)
	}
	// The holder identity is the hostname, as upstream's (dashboards and
	// runbooks read it as the pod name); the lock also names this process,
	// so that two processes of one hostname never both lead.
	identity, instance := hostname, uuid.NewString()
	le := opts.LeaderElection
	if le.ResourceNamespace != "" && le.ResourceNamespace != opts.Namespace {
		// Upstream ignores this flag too; honouring it would put an
		// upstream replica and this one on different Leases during a
		// rolling swap, and both would act.
		klog.FromContext(ctx).Info("Warning: --leader-elect-resource-namespace is ignored, as upstream: the Lease lives in --namespace",
			"leaderElectResourceNamespace", le.ResourceNamespace, "namespace", opts.Namespace)
	}
	// The election records upstream's LeaderElection events ("... became
	// leader") on the lock object.
	broadcaster := newEventBroadcaster(ctx, opts)
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	electionEvents := broadcaster.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler", Host: hostname})
	lock, err := leaderlease.NewInstanceLock(client.CoordinationV1(), opts.Namespace, le.ResourceName, identity, instance, electionEvents)
	if err != nil {
		return fmt.Errorf("building the leader-election lock: %w", err)
	}

	// The elector calls OnStartedLeading in a goroutine of its own; the lead
	// context reaches this goroutine through leadCh so that act runs here and
	// is known to have finished before this function returns.
	leadCh := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   le.LeaseDuration,
		RenewDeadline:   le.RenewDeadline,
		RetryPeriod:     le.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            le.ResourceName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) { leadCh <- leadCtx },
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "lease", klog.KRef(opts.Namespace, le.ResourceName), "identity", identity)
			},
			OnNewLeader: func(current string) {
				if current != identity {
					logger.Info("Another replica holds the lease; waiting", "leader", current)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("building the leader elector: %w", err)
	}
	logger.Info("Waiting for the leader-election lease", "lease", klog.KRef(opts.Namespace, le.ResourceName), "identity", identity, "instance", instance)
	// The elector runs on a context of its own, ended when ctx ends or act
	// returns: a start-up error (a missing CRD, a bad configuration) then
	// releases the Lease at once and the process exits non-zero, instead of
	// holding the Lease, and a healthy-looking /health-check, forever.
	electCtx, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	electorDone := make(chan struct{})
	go func() {
		defer close(electorDone)
		elector.Run(electCtx) // returns when electCtx ends (releasing the lease) or the lease is lost
	}()

	select {
	case leadCtx := <-leadCh:
		logger.Info("Acquired the leader-election lease", "lease", klog.KRef(opts.Namespace, le.ResourceName), "identity", identity, "instance", instance)
		err := act(leadCtx) // leadCtx ends when the lease is lost or ctx ends
		lost := leadCtx.Err() != nil && ctx.Err() == nil
		stopElecting()
		<-electorDone
		// The elector's own release can lose a race with a renewal cancelled
		// in flight; the Lease is read again and cleared while it is ours.
		released, rerr := leaderlease.Release(context.WithoutCancel(ctx), lock, identity, le.RenewDeadline, clock.RealClock{})
		if rerr != nil {
			logger.Error(rerr, "The leader-election lease may stay held until it expires", "lease", klog.KRef(opts.Namespace, le.ResourceName))
		} else if released == leaderlease.Cleared {
			logger.V(2).Info("Cleared the holder of the leader-election lease", "lease", klog.KRef(opts.Namespace, le.ResourceName))
		}
		switch {
		case err != nil && lost:
			return fmt.Errorf("%w: %w", errLostLease, err)
		case err != nil:
			logger.Info("Released the leader-election lease after an error", "lease", klog.KRef(opts.Namespace, le.ResourceName))
			return err
		}
	case <-electorDone:
	}
	if ctx.Err() == nil {
		return errLostLease
	}
	return nil
}
