package awsfake

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/google/go-cmp/cmp"
)

// sqsClient builds the SDK's SQS client from the fake's environment.
func sqsClient(t *testing.T, s *Server) *sqs.Client {
	t.Helper()
	for _, kv := range s.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cfg, err := config.LoadDefaultConfig(t.Context(), noRetries)
	if err != nil {
		t.Fatalf("LoadDefaultConfig: %v", err)
	}
	return sqs.NewFromConfig(cfg)
}

func TestSQSQueueURLAndErrors(t *testing.T) {
	s := startFake(t)
	c := sqsClient(t, s)
	created, err := c.CreateQueue(t.Context(), &sqs.CreateQueueInput{QueueName: aws.String("interruptions")})
	if err != nil {
		t.Fatalf("CreateQueue: %v", err)
	}
	got, err := c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("interruptions")})
	if err != nil {
		t.Fatalf("GetQueueUrl: %v", err)
	}
	if aws.ToString(got.QueueUrl) != aws.ToString(created.QueueUrl) || !strings.HasSuffix(aws.ToString(got.QueueUrl), "/123456789012/interruptions") {
		t.Errorf("GetQueueUrl = %q, CreateQueue = %q; want the same URL ending in /<account>/<name>", aws.ToString(got.QueueUrl), aws.ToString(created.QueueUrl))
	}
	_, err = c.GetQueueUrl(t.Context(), &sqs.GetQueueUrlInput{QueueName: aws.String("missing")})
	var nq *sqstypes.QueueDoesNotExist
	if !errorsAs(err, &nq) {
		t.Errorf("GetQueueUrl(missing) = %v (code %q), want the SDK's QueueDoesNotExist", err, apiErrorCode(err))
	}
	_, err = c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl, MaxNumberOfMessages: 11})
	if err == nil {
		t.Errorf("ReceiveMessage(MaxNumberOfMessages=11) succeeded, want an error")
	}
	_, err = c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: created.QueueUrl, ReceiptHandle: aws.String("never-given")})
	var bad *sqstypes.ReceiptHandleIsInvalid
	if !errorsAs(err, &bad) {
		t.Errorf("DeleteMessage(unknown handle) = %v (code %q), want ReceiptHandleIsInvalid", err, apiErrorCode(err))
	}
	s.Deny("ReceiveMessage")
	_, err = c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: created.QueueUrl})
	if code := apiErrorCode(err); code != "AccessDenied" {
		t.Errorf("denied ReceiveMessage: error %v code %q, want AccessDenied", err, code)
	}
}

func TestSQSReceiveVisibilityDelete(t *testing.T) {
	s := startFake(t)
	c := sqsClient(t, s)
	url := s.CreateQueue("q")
	for _, b := range []string{"one", "two", "three"} {
		s.SendMessage("q", b)
	}
	// At most MaxNumberOfMessages, oldest first; the SDK checks each
	// body's MD5.
	out, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 2, VisibilityTimeout: 1})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if diff := cmp.Diff([]string{"one", "two"}, bodies(out.Messages)); diff != "" {
		t.Fatalf("first receive (-want +got):\n%s", diff)
	}
	// The two received are hidden for the visibility timeout.
	out2, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if diff := cmp.Diff([]string{"three"}, bodies(out2.Messages)); diff != "" {
		t.Fatalf("second receive (-want +got):\n%s", diff)
	}
	if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage: %v", err)
	}
	// A repeated delete of the same handle succeeds, as SQS's does.
	if _, err := c.DeleteMessage(t.Context(), &sqs.DeleteMessageInput{QueueUrl: aws.String(url), ReceiptHandle: out.Messages[0].ReceiptHandle}); err != nil {
		t.Fatalf("DeleteMessage again: %v", err)
	}
	// After the timeout "two" is visible again (not "one", deleted), with
	// a new handle; a long poll returns as soon as it has a message.
	time.Sleep(1100 * time.Millisecond)
	start := time.Now()
	out3, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(url), MaxNumberOfMessages: 10, WaitTimeSeconds: 20})
	if err != nil {
		t.Fatalf("ReceiveMessage: %v", err)
	}
	if diff := cmp.Diff([]string{"two"}, bodies(out3.Messages)); diff != "" {
		t.Fatalf("receive after the timeout (-want +got):\n%s", diff)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("a long poll with a message waiting took %v", took)
	}
	if aws.ToString(out3.Messages[0].ReceiptHandle) == aws.ToString(out.Messages[1].ReceiptHandle) {
		t.Errorf("a new receive kept the old receipt handle")
	}
	// Batch delete: the old handle of "two" no longer names it (a new
	// receive replaced it) but was given once, so it is not an error;
	// the new one deletes it.
	del, err := c.DeleteMessageBatch(t.Context(), &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(url), Entries: []sqstypes.DeleteMessageBatchRequestEntry{
		{Id: aws.String("a"), ReceiptHandle: out3.Messages[0].ReceiptHandle},
		{Id: aws.String("b"), ReceiptHandle: aws.String("bogus")},
	}})
	if err != nil {
		t.Fatalf("DeleteMessageBatch: %v", err)
	}
	if len(del.Successful) != 1 || aws.ToString(del.Successful[0].Id) != "a" || len(del.Failed) != 1 ||
		aws.ToString(del.Failed[0].Code) != "ReceiptHandleIsInvalid" {
		t.Errorf("DeleteMessageBatch: successful %v failed %v, want a ok and b ReceiptHandleIsInvalid", del.Successful, del.Failed)
	}
	if diff := cmp.Diff([]string{"three"}, s.QueueMessages("q")); diff != "" {
		t.Errorf("left on the queue (-want +got):\n%s", diff)
	}
	// An empty queue's long poll is bounded by the fake.
	s.SendMessage("empty", "x")
	emptyURL := s.queueURL("empty")
	if _, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(emptyURL), VisibilityTimeout: 60}); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	out4, err := c.ReceiveMessage(t.Context(), &sqs.ReceiveMessageInput{QueueUrl: aws.String(emptyURL), WaitTimeSeconds: 20})
	if err != nil || len(out4.Messages) != 0 {
		t.Fatalf("ReceiveMessage on a queue with nothing visible: %v, %d messages", err, len(out4.Messages))
	}
	if took := time.Since(start); took > sqsMaxWait+time.Second {
		t.Errorf("an empty long poll took %v, want at most about %v", took, sqsMaxWait)
	}
}

func TestEventsOnTheQueue(t *testing.T) {
	s := startFake(t, WithRegion("eu-west-1"))
	s.SendSpotInterruption("q", "i-0123456789abcdef0")
	s.SendRebalance("q", "i-0123456789abcdef0")
	s.SendStateChange("q", "i-0123456789abcdef0", "stopping")
	s.SendScheduledChange("q", "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED", time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC), "i-1", "i-2")
	msgs := s.QueueMessages("q")
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4", len(msgs))
	}
	type envelope struct {
		Version    string          `json:"version"`
		DetailType string          `json:"detail-type"`
		Source     string          `json:"source"`
		Region     string          `json:"region"`
		Account    string          `json:"account"`
		Time       string          `json:"time"`
		Resources  []string        `json:"resources"`
		Detail     json.RawMessage `json:"detail"`
	}
	want := []struct{ detailType, source, detail string }{
		{DetailSpotInterruption, "aws.ec2", `{"instance-action":"terminate","instance-id":"i-0123456789abcdef0"}`},
		{DetailRebalance, "aws.ec2", `{"instance-id":"i-0123456789abcdef0"}`},
		{DetailStateChange, "aws.ec2", `{"instance-id":"i-0123456789abcdef0","state":"stopping"}`},
	}
	for i, m := range msgs {
		var e envelope
		if err := json.Unmarshal([]byte(m), &e); err != nil {
			t.Fatalf("message %d is not JSON: %v", i, err)
		}
		if e.Version != "0" || e.Region != "eu-west-1" || e.Account != accountID || len(e.Resources) == 0 {
			t.Errorf("message %d envelope %+v", i, e)
		}
		if _, err := time.Parse(time.RFC3339, e.Time); err != nil {
			t.Errorf("message %d time %q: %v", i, e.Time, err)
		}
		if i < len(want) {
			if e.DetailType != want[i].detailType || e.Source != want[i].source || string(e.Detail) != want[i].detail {
				t.Errorf("message %d: %s %s %s, want %+v", i, e.DetailType, e.Source, e.Detail, want[i])
			}
			continue
		}
		var d struct {
			Service           string `json:"service"`
			EventTypeCategory string `json:"eventTypeCategory"`
			StartTime         string `json:"startTime"`
			AffectedEntities  []struct {
				EntityValue string `json:"entityValue"`
			} `json:"affectedEntities"`
		}
		if err := json.Unmarshal(e.Detail, &d); err != nil {
			t.Fatal(err)
		}
		if e.DetailType != DetailHealth || e.Source != "aws.health" || d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" ||
			len(d.AffectedEntities) != 2 || d.AffectedEntities[1].EntityValue != "i-2" || d.StartTime != "Tue, 01 Dec 2026 10:00:00 GMT" {
			t.Errorf("health event %s %s %+v", e.DetailType, e.Source, d)
		}
	}
}

func bodies(ms []sqstypes.Message) []string {
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, aws.ToString(m.Body))
	}
	return out
}

func errorsAs[T error](err error, target *T) bool { return err != nil && errors.As(err, target) }
