package leaderlease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/google/uuid"
	apiv1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// ErrLost ends the process when another replica took the Lease.
var ErrLost = errors.New("lost the leader-election lease")

// Config is the Lease and its timing (client-go's elector's).
type Config struct {
	// Namespace and Name are the Lease's.
	Namespace, Name string
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
	// Clock times the last release; nil for the real clock.
	Clock clock.Clock
}

// Run runs act while this replica holds the Lease. It returns nil when ctx
// ends (releasing the Lease) and ErrLost when the Lease was lost while ctx
// was still live. The election records its LeaderElection events ("...
// became leader") on the lock object through events, which Run starts
// recording to client and shuts down before it returns.
func Run(ctx context.Context, cfg Config, client kubernetes.Interface, events record.EventBroadcaster,
	act func(context.Context) error) error {
	defer events.Shutdown()
	logger := klog.FromContext(ctx)
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
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
	// The election records upstream's LeaderElection events ("... became
	// leader") on the lock object.
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	electionEvents := events.NewRecorder(clientgoscheme.Scheme, apiv1.EventSource{Component: "cluster-autoscaler", Host: hostname})
	lock, err := NewInstanceLock(client.CoordinationV1(), cfg.Namespace, cfg.Name, identity, instance, electionEvents)
	if err != nil {
		return fmt.Errorf("building the leader-election lock: %w", err)
	}

	// The elector calls OnStartedLeading in a goroutine of its own; the lead
	// context reaches this goroutine through leadCh so that act runs here and
	// is known to have finished before this function returns.
	leadCh := make(chan context.Context, 1)
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) { leadCh <- leadCtx },
			OnStoppedLeading: func() {
				logger.Info("Stopped leading", "lease", klog.KRef(cfg.Namespace, cfg.Name), "identity", identity)
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
	logger.Info("Waiting for the leader-election lease", "lease", klog.KRef(cfg.Namespace, cfg.Name), "identity", identity, "instance", instance)
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
		logger.Info("Acquired the leader-election lease", "lease", klog.KRef(cfg.Namespace, cfg.Name), "identity", identity, "instance", instance)
		err := act(leadCtx) // leadCtx ends when the lease is lost or ctx ends
		lost := leadCtx.Err() != nil && ctx.Err() == nil
		stopElecting()
		<-electorDone
		// The elector's own release can lose a race with a renewal cancelled
		// in flight; the Lease is read again and cleared while it is ours.
		released, rerr := Release(context.WithoutCancel(ctx), lock, identity, cfg.RenewDeadline, clk)
		if rerr != nil {
			logger.Error(rerr, "The leader-election lease may stay held until it expires", "lease", klog.KRef(cfg.Namespace, cfg.Name))
		} else if released == Cleared {
			logger.V(2).Info("Cleared the holder of the leader-election lease", "lease", klog.KRef(cfg.Namespace, cfg.Name))
		}
		switch {
		case err != nil && lost:
			return fmt.Errorf("%w: %w", ErrLost, err)
		case err != nil:
			logger.Info("Released the leader-election lease after an error", "lease", klog.KRef(cfg.Namespace, cfg.Name))
			return err
		}
	case <-electorDone:
	}
	if ctx.Err() == nil {
		return ErrLost
	}
	return nil
}
