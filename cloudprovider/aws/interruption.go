package aws

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// SQSAPI is what the provider calls of the SQS client (the interruption
// queue: sqs:GetQueueUrl, sqs:ReceiveMessage, sqs:DeleteMessage).
type SQSAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, opts ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, opts ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessage(ctx context.Context, in *sqs.DeleteMessageInput, opts ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error)
}

// Bounds of one poll of the interruption queue.
const (
	// receivesPerPoll: a poll takes at most this many ReceiveMessage calls
	// of sqsBatch messages each (it stops at the first that is not full).
	receivesPerPoll = 3
	sqsBatch        = 10
	// pollWait is the first call's long-poll wait (the others do not wait).
	pollWait = 1
	// visibility hides a message received (and still pending here) from
	// other receives; a process that dies before acting sees it again, or
	// its successor does, after this.
	visibility = 60
	// spotWarning is how long before the end a Spot interruption warning
	// comes.
	spotWarning = 2 * time.Minute
	// maxPendingMessages bounds the messages kept waiting for an ack.
	maxPendingMessages = 1000
)

// The detail-types of the EventBridge events the queue receives.
const (
	detailSpot      = "EC2 Spot Instance Interruption Warning"
	detailRebalance = "EC2 Instance Rebalance Recommendation"
	detailState     = "EC2 Instance State-change Notification"
	detailHealth    = "AWS Health Event"
)

// Actions of a dropped message.
const (
	dropForeign   = "foreign"
	dropIgnored   = "ignored"
	dropMalformed = "malformed"
	dropUnknown   = "unknown"
)

// interruptions reads the interruption queue.
type interruptions struct {
	client    SQSAPI
	queue     string // URL or name, as configured
	rebalance bool

	mu  sync.Mutex
	url string // resolved
	// pending are the messages whose notices wait for an ack, by message ID.
	pending map[string]*pendingMessage
	// undeleted are receipt handles of messages to delete whose deletion
	// failed, tried again at the next poll.
	undeleted []string
}

type pendingMessage struct {
	receipt string
	notices map[string]cloudprovider.InterruptionNotice
}

// WithInterruptionQueue makes the provider read the EventBridge events of
// an SQS queue (its URL or name) through c; rebalance says whether
// rebalance recommendations are handed on (otherwise they are dropped as
// ignored).
func WithInterruptionQueue(c SQSAPI, queue string, rebalance bool) Option {
	return func(p *Provider) {
		if c != nil && queue != "" {
			p.interrupt = &interruptions{client: c, queue: queue, rebalance: rebalance, pending: map[string]*pendingMessage{}}
		}
	}
}

// InterruptionSource returns the provider as a cloudprovider.InterruptionSource
// when an interruption queue is configured, else nil.
func (p *Provider) InterruptionSource() cloudprovider.InterruptionSource {
	if p.interrupt == nil {
		return nil
	}
	return p
}

var _ cloudprovider.InterruptionSource = (*Provider)(nil)

// errNoQueue: no interruption queue is configured.
var errNoQueue = errors.New("no interruption queue is configured (--aws-interruption-queue)")

// queueURL resolves the configured queue once: a URL as it is, a name
// through GetQueueUrl.
func (q *interruptions) queueURL(ctx context.Context) (string, error) {
	if q.url != "" {
		return q.url, nil
	}
	if strings.HasPrefix(q.queue, "https://") || strings.HasPrefix(q.queue, "http://") {
		q.url = q.queue
		return q.url, nil
	}
	out, err := q.client.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(q.queue)})
	if err != nil {
		return "", callError(fmt.Sprintf("finding the URL of SQS queue %q", q.queue), err, true)
	}
	q.url = aws.ToString(out.QueueUrl)
	return q.url, nil
}

// PollInterruptions implements cloudprovider.InterruptionSource: at most
// receivesPerPoll receives of sqsBatch messages; each message is parsed
// and matched to the instances of the groups of the last Refresh (nothing
// is read before the first). A message naming no instance of a managed
// group, of a kind not acted on, or that cannot be parsed is deleted at
// once and reported dropped; the others' notices stay pending until
// acknowledged.
func (p *Provider) PollInterruptions(ctx context.Context) ([]cloudprovider.InterruptionNotice, []cloudprovider.DroppedNotice, error) {
	q := p.interrupt
	if q == nil {
		return nil, nil, errNoQueue
	}
	p.mu.Lock()
	refreshed := !p.refreshedAt.IsZero()
	p.mu.Unlock()
	q.mu.Lock()
	defer q.mu.Unlock()
	if !refreshed {
		return q.pendingLocked(), nil, nil
	}
	url, err := q.queueURL(ctx)
	if err != nil {
		return q.pendingLocked(), nil, err
	}
	q.retryDeletesLocked(ctx, url)
	var dropped []cloudprovider.DroppedNotice
	for i := 0; i < receivesPerPoll; i++ {
		wait := int32(0)
		if i == 0 {
			wait = pollWait
		}
		out, err := q.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(url),
			MaxNumberOfMessages: sqsBatch, WaitTimeSeconds: wait, VisibilityTimeout: visibility})
		if err != nil {
			return q.pendingLocked(), dropped, callError("receiving from the interruption queue", err, true)
		}
		for _, m := range out.Messages {
			if d, ok := p.takeMessage(ctx, q, m); !ok {
				dropped = append(dropped, d)
				// A failed delete is logged and retried at the next poll.
				_ = q.deleteLocked(ctx, url, aws.ToString(m.ReceiptHandle))
			}
		}
		if len(out.Messages) < sqsBatch {
			break
		}
	}
	return q.pendingLocked(), dropped, nil
}

// takeMessage parses a message and keeps its notices pending; it reports
// the message dropped (false) when it has none to hand on.
func (p *Provider) takeMessage(ctx context.Context, q *interruptions, m sqstypes.Message) (cloudprovider.DroppedNotice, bool) {
	logger := klog.FromContext(ctx)
	id := aws.ToString(m.MessageId)
	if pm := q.pending[id]; pm != nil {
		pm.receipt = aws.ToString(m.ReceiptHandle) // seen again: only the handle is new
		return cloudprovider.DroppedNotice{}, true
	}
	notices, drop := parseEvent(aws.ToString(m.Body), q.rebalance)
	if drop != nil {
		logger.V(2).Info("Interruption queue message dropped", "messageID", id, "kind", drop.Kind, "action", drop.Action, "detail", drop.Detail)
		return *drop, false
	}
	s := p.current()
	kept := map[string]cloudprovider.InterruptionNotice{}
	for _, n := range notices {
		g := s.byInstance[n.Instance]
		if g == nil {
			continue
		}
		for _, in := range g.desc.Instances {
			if in.ID == n.Instance {
				n.InstanceType, n.Zone = in.Type, in.Zone
			}
		}
		for _, in := range g.instances {
			if lastSegment(in.Id) == n.Instance {
				n.Instance = in.Id
			}
		}
		n.Group = g.Id()
		n.ID = id + "/" + n.Instance
		kept[n.ID] = n
		p.avoidInterrupted(ctx, n)
	}
	if len(kept) == 0 || len(q.pending) >= maxPendingMessages {
		d := cloudprovider.DroppedNotice{Kind: string(notices[0].Kind), Action: dropForeign,
			Detail: "no instance of a managed node group: " + notices[0].Detail}
		if len(kept) > 0 {
			d.Action, d.Detail = dropIgnored, fmt.Sprintf("more than %d messages wait for an ack", maxPendingMessages)
		}
		logger.V(2).Info("Interruption queue message dropped", "messageID", id, "kind", d.Kind, "action", d.Action, "detail", d.Detail)
		return d, false
	}
	q.pending[id] = &pendingMessage{receipt: aws.ToString(m.ReceiptHandle), notices: kept}
	for _, n := range kept {
		logger.Info("Interruption notice", "kind", n.Kind, "instance", n.Instance, "nodeGroup", n.Group, "deadline", n.Deadline, "detail", n.Detail)
	}
	return cloudprovider.DroppedNotice{}, true
}

// AckInterruptions implements cloudprovider.InterruptionSource: a message
// is deleted once every notice it carried is acknowledged.
func (p *Provider) AckInterruptions(ctx context.Context, ids []string) error {
	q := p.interrupt
	if q == nil {
		return errNoQueue
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	url, err := q.queueURL(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, nid := range ids {
		msg, _, _ := strings.Cut(nid, "/")
		pm := q.pending[msg]
		if pm == nil {
			continue
		}
		delete(pm.notices, nid)
		if len(pm.notices) > 0 {
			continue
		}
		delete(q.pending, msg)
		if err := q.deleteLocked(ctx, url, pm.receipt); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// deleteLocked deletes a message; a failed deletion is tried again at the
// next poll.
func (q *interruptions) deleteLocked(ctx context.Context, url, receipt string) error {
	_, err := q.client.DeleteMessage(ctx, &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: aws.String(receipt)})
	if err != nil {
		if len(q.undeleted) < maxPendingMessages {
			q.undeleted = append(q.undeleted, receipt)
		}
		err = callError("deleting a message of the interruption queue", err, false)
		klog.FromContext(ctx).Error(err, "Deleting an interruption queue message; retrying at the next poll")
	}
	return err
}

func (q *interruptions) retryDeletesLocked(ctx context.Context, url string) {
	todo := q.undeleted
	q.undeleted = nil
	for _, r := range todo {
		_ = q.deleteLocked(ctx, url, r)
	}
}

func (q *interruptions) pendingLocked() []cloudprovider.InterruptionNotice {
	var out []cloudprovider.InterruptionNotice
	for _, pm := range q.pending {
		for _, n := range pm.notices {
			out = append(out, n)
		}
	}
	return out
}

// newSQSClient builds the SDK's SQS client from the provider's config
// (AWS_ENDPOINT_URL_SQS and the shared config's endpoints apply, and a
// --cloud-config override of service "sqs").
func newSQSClient(cfg aws.Config, cc cloudConfig) SQSAPI {
	if o, ok := cc.override("sqs", cfg.Region); ok {
		return sqs.NewFromConfig(cfg, func(opts *sqs.Options) {
			opts.BaseEndpoint, opts.Region = aws.String(o.URL), o.SigningRegion
		})
	}
	return sqs.NewFromConfig(cfg)
}
