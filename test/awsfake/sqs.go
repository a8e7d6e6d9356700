package awsfake

import (
	"crypto/md5" //nolint:gosec // SQS's MD5OfBody is MD5 by definition
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// SQS speaks the AWS JSON 1.0 protocol: a POST to / whose X-Amz-Target is
// "AmazonSQS.<Action>", a JSON body, a JSON answer, errors as a JSON
// document whose __type names the error (with the query-protocol code in
// x-amzn-query-error, for clients in query-compatible mode).
const (
	svcSQS       = "sqs"
	sqsTarget    = "AmazonSQS."
	sqsJSONType  = "application/x-amz-json-1.0"
	sqsErrPrefix = "com.amazonaws.sqs#"
	// sqsMaxWait caps how long the fake holds a ReceiveMessage whose
	// WaitTimeSeconds asks for a long poll (AWS allows 20 s; tests must not
	// hang that long on an empty queue).
	sqsMaxWait = 2 * time.Second
	// sqsDefaultVisibility is a new queue's VisibilityTimeout (AWS's 30 s).
	sqsDefaultVisibility = 30 * time.Second
)

// sqsQueue is a standard queue.
type sqsQueue struct {
	name       string
	visibility time.Duration
	messages   []*sqsMessage // in send order
}

// sqsMessage is a message in a queue.
type sqsMessage struct {
	id, body, md5 string
	sent          time.Time
	receives      int
	visibleAt     time.Time // zero: visible
	receipt       string    // the latest receive's handle ("" before any)
}

// sqsError is an SQS error: its code (the JSON __type without namespace)
// and the query-protocol code clients in query-compatible mode read.
func sqsError(status int, code, queryCode, format string, args ...any) *apiError {
	if queryCode != "" {
		code = code + "|" + queryCode
	}
	return &apiError{status: status, code: code, message: fmt.Sprintf(format, args...)}
}

var (
	errNoQueue = func(what string) *apiError {
		return sqsError(http.StatusBadRequest, "QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue",
			"The specified queue %s does not exist.", what)
	}
	errBadReceipt = func(h string) *apiError {
		return sqsError(http.StatusBadRequest, "ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid",
			"The input receipt handle %q is not a valid receipt handle.", h)
	}
)

func invalidParameter(format string, args ...any) *apiError {
	return sqsError(http.StatusBadRequest, "InvalidParameterValue", "InvalidParameterValue", format, args...)
}

// sqsHandler answers one SQS action from its JSON body.
type sqsHandler func(s *Server, r *http.Request, body []byte) (any, *apiError)

// sqsActions are the SQS actions the fake serves.
var sqsActions = map[string]sqsHandler{
	"CreateQueue":        (*Server).sqsCreateQueue,
	"GetQueueUrl":        (*Server).sqsGetQueueURL,
	"SendMessage":        (*Server).sqsSendMessage,
	"ReceiveMessage":     (*Server).sqsReceiveMessage,
	"DeleteMessage":      (*Server).sqsDeleteMessage,
	"DeleteMessageBatch": (*Server).sqsDeleteMessageBatch,
}

// isSQS tells an SQS (JSON protocol) request by its X-Amz-Target.
func isSQS(r *http.Request) bool { return strings.HasPrefix(r.Header.Get("X-Amz-Target"), sqsTarget) }

// serveSQS answers an SQS request.
func (s *Server) serveSQS(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	action := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), sqsTarget)
	if r.Method != http.MethodPost {
		writeSQSError(w, reqID, sqsError(http.StatusMethodNotAllowed, "InvalidAction", "", "only POST is supported"))
		return
	}
	if aerr := s.checkAuth(r.Header.Get("Authorization"), svcSQS); aerr != nil {
		writeSQSError(w, reqID, aerr)
		return
	}
	h, ok := sqsActions[action]
	if !ok {
		writeSQSError(w, reqID, sqsError(http.StatusBadRequest, "InvalidAction", "AWS.SimpleQueueService.UnsupportedOperation",
			"The action %q is not valid for this web service.", action))
		return
	}
	if aerr := s.countAndThrottle(action, svcSQS, isRetry(r.Header.Get("amz-sdk-request"))); aerr != nil {
		aerr.code = "RequestThrottled"
		writeSQSError(w, reqID, aerr)
		return
	}
	if s.isDenied(action) {
		writeSQSError(w, reqID, sqsError(http.StatusForbidden, "AccessDenied", "AccessDenied",
			"User: arn:aws:sts::%s:assumed-role/cluster-autoscaler/awsfake is not authorized to perform: sqs:%s", accountID, action))
		return
	}
	s.runBeforeCall(action)
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil || (len(body) > 0 && !json.Valid(body)) {
		writeSQSError(w, reqID, sqsError(http.StatusBadRequest, "SerializationException", "", "the request body is not JSON"))
		return
	}
	out, aerr := h(s, r, body)
	if aerr != nil {
		writeSQSError(w, reqID, aerr)
		return
	}
	raw, _ := json.Marshal(out)
	w.Header().Set("Content-Type", sqsJSONType)
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = w.Write(raw)
}

func (s *Server) isDenied(action string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.deny[action]
}

// writeSQSError writes an error document of the JSON protocol.
func writeSQSError(w http.ResponseWriter, reqID string, e *apiError) {
	code, query, _ := strings.Cut(e.code, "|")
	if query != "" {
		fault := "Sender"
		if e.status >= 500 {
			fault = "Receiver"
		}
		w.Header().Set("x-amzn-query-error", query+";"+fault)
	}
	raw, _ := json.Marshal(map[string]string{"__type": sqsErrPrefix + code, "message": e.message})
	w.Header().Set("Content-Type", sqsJSONType)
	w.Header().Set("x-amzn-RequestId", reqID)
	w.WriteHeader(e.status)
	_, _ = w.Write(raw)
}

// queueURL is the URL of a queue as the fake names it: its own address,
// the account, the queue's name.
func (s *Server) queueURL(name string) string { return s.URL() + "/" + accountID + "/" + name }

// queueByURLLocked finds the queue a QueueUrl names (by its last path
// segment, the queue's name, as long as the account matches).
func (s *Server) queueByURLLocked(raw string) (*sqsQueue, *apiError) {
	if raw == "" {
		return nil, sqsError(http.StatusBadRequest, "MissingParameter", "MissingParameter", "The request must contain the parameter QueueUrl.")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, sqsError(http.StatusBadRequest, "InvalidAddress", "InvalidAddress", "The address %s is not valid for this endpoint.", raw)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 || parts[0] != accountID {
		return nil, sqsError(http.StatusBadRequest, "InvalidAddress", "InvalidAddress", "The address %s is not valid for this endpoint.", raw)
	}
	q := s.sqs.queues[parts[1]]
	if q == nil {
		return nil, errNoQueue(raw)
	}
	return q, nil
}

// CreateQueue makes a standard queue (test set-up; also served as the
// CreateQueue action) and returns its URL; an existing queue is kept.
func (s *Server) CreateQueue(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.createQueueLocked(name)
	return s.queueURL(name)
}

func (s *Server) createQueueLocked(name string) *sqsQueue {
	if s.sqs.queues == nil {
		s.sqs.queues = map[string]*sqsQueue{}
	}
	if q := s.sqs.queues[name]; q != nil {
		return q
	}
	q := &sqsQueue{name: name, visibility: sqsDefaultVisibility}
	s.sqs.queues[name] = q
	return q
}

// validQueueName: 1-80 characters, alphanumerics, hyphens and underscores
// (standard queues).
func validQueueName(n string) bool {
	if n == "" || len(n) > 80 {
		return false
	}
	for _, r := range n {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func (s *Server) sqsCreateQueue(_ *http.Request, body []byte) (any, *apiError) {
	var in struct {
		QueueName  string
		Attributes map[string]string
	}
	_ = json.Unmarshal(body, &in)
	if !validQueueName(in.QueueName) {
		return nil, invalidParameter("Can only include alphanumeric characters, hyphens, or underscores. 1 to 80 in length")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.createQueueLocked(in.QueueName)
	if v, ok := in.Attributes["VisibilityTimeout"]; ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > 43200 {
			return nil, invalidParameter("Invalid value for the parameter VisibilityTimeout.")
		}
		q.visibility = time.Duration(n) * time.Second
	}
	return map[string]string{"QueueUrl": s.queueURL(q.name)}, nil
}

func (s *Server) sqsGetQueueURL(_ *http.Request, body []byte) (any, *apiError) {
	var in struct {
		QueueName              string
		QueueOwnerAWSAccountId string //nolint:revive // the API's spelling
	}
	_ = json.Unmarshal(body, &in)
	if in.QueueName == "" {
		return nil, sqsError(http.StatusBadRequest, "MissingParameter", "MissingParameter", "The request must contain the parameter QueueName.")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if (in.QueueOwnerAWSAccountId != "" && in.QueueOwnerAWSAccountId != accountID) || s.sqs.queues[in.QueueName] == nil {
		return nil, errNoQueue(in.QueueName)
	}
	return map[string]string{"QueueUrl": s.queueURL(in.QueueName)}, nil
}

func (s *Server) sqsSendMessage(_ *http.Request, body []byte) (any, *apiError) {
	var in struct{ QueueUrl, MessageBody string } //nolint:revive // the API's spelling
	_ = json.Unmarshal(body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueByURLLocked(in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	if in.MessageBody == "" {
		return nil, sqsError(http.StatusBadRequest, "MissingParameter", "MissingParameter", "The request must contain the parameter MessageBody.")
	}
	m := s.enqueueLocked(q, in.MessageBody)
	return map[string]string{"MessageId": m.id, "MD5OfMessageBody": m.md5}, nil
}

// SendMessage puts a message on a queue (created when missing) as a
// producer would (EventBridge, for the events of events.go); it returns the
// message's ID.
func (s *Server) SendMessage(queue, body string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.enqueueLocked(s.createQueueLocked(queue), body).id
}

func (s *Server) enqueueLocked(q *sqsQueue, body string) *sqsMessage {
	sum := md5.Sum([]byte(body)) //nolint:gosec // see the import
	m := &sqsMessage{id: newRequestID(), body: body, md5: hex.EncodeToString(sum[:]), sent: s.now()}
	q.messages = append(q.messages, m)
	return m
}

// sqsWireMessage is a message in ReceiveMessage's answer.
type sqsWireMessage struct {
	MessageId     string            //nolint:revive // the API's spelling
	ReceiptHandle string            //nolint:revive // the API's spelling
	MD5OfBody     string            //nolint:revive // the API's spelling
	Body          string            //nolint:revive // the API's spelling
	Attributes    map[string]string `json:",omitempty"`
}

func (s *Server) sqsReceiveMessage(r *http.Request, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl                    string //nolint:revive // the API's spelling
		MaxNumberOfMessages         *int
		WaitTimeSeconds             *int
		VisibilityTimeout           *int
		AttributeNames              []string
		MessageSystemAttributeNames []string
	}
	_ = json.Unmarshal(body, &in)
	max, wait := 1, 0
	if in.MaxNumberOfMessages != nil {
		if *in.MaxNumberOfMessages < 1 || *in.MaxNumberOfMessages > 10 {
			return nil, invalidParameter("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and 10, if provided.", *in.MaxNumberOfMessages)
		}
		max = *in.MaxNumberOfMessages
	}
	if in.WaitTimeSeconds != nil {
		if *in.WaitTimeSeconds < 0 || *in.WaitTimeSeconds > 20 {
			return nil, invalidParameter("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= 20, if provided.", *in.WaitTimeSeconds)
		}
		wait = *in.WaitTimeSeconds
	}
	if in.VisibilityTimeout != nil && (*in.VisibilityTimeout < 0 || *in.VisibilityTimeout > 43200) {
		return nil, invalidParameter("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be >= 0 and <= 43200, if provided.", *in.VisibilityTimeout)
	}
	attrs := len(in.AttributeNames) > 0 || len(in.MessageSystemAttributeNames) > 0
	deadline := time.Now().Add(min(time.Duration(wait)*time.Second, sqsMaxWait))
	for {
		out, aerr := s.receiveOnce(in.QueueUrl, max, in.VisibilityTimeout, attrs)
		if aerr != nil || len(out) > 0 || !time.Now().Before(deadline) {
			return map[string][]sqsWireMessage{"Messages": out}, aerr
		}
		select {
		case <-r.Context().Done():
			return map[string][]sqsWireMessage{"Messages": nil}, nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// receiveOnce takes up to max visible messages, oldest first, and hides
// them for the visibility timeout (the call's, else the queue's); each
// receive gets a new receipt handle.
func (s *Server) receiveOnce(queueURL string, max int, visibility *int, attrs bool) ([]sqsWireMessage, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueByURLLocked(queueURL)
	if aerr != nil {
		return nil, aerr
	}
	vis := q.visibility
	if visibility != nil {
		vis = time.Duration(*visibility) * time.Second
	}
	now := s.now()
	var out []sqsWireMessage
	for _, m := range q.messages {
		if len(out) == max {
			break
		}
		if !m.visibleAt.IsZero() && now.Before(m.visibleAt) {
			continue
		}
		m.receives++
		m.visibleAt = now.Add(vis)
		m.receipt = randomHex(64)
		w := sqsWireMessage{MessageId: m.id, ReceiptHandle: m.receipt, MD5OfBody: m.md5, Body: m.body}
		if attrs {
			w.Attributes = map[string]string{
				"SentTimestamp":           strconv.FormatInt(m.sent.UnixMilli(), 10),
				"ApproximateReceiveCount": strconv.Itoa(m.receives),
			}
		}
		out = append(out, w)
	}
	return out, nil
}

// deleteLocked deletes the message a receipt handle names. A handle of a
// message already deleted succeeds (SQS forgives a repeated delete); a
// handle the queue never gave is ReceiptHandleIsInvalid.
func (s *Server) deleteLocked(q *sqsQueue, handle string) *apiError {
	if handle == "" {
		return sqsError(http.StatusBadRequest, "MissingParameter", "MissingParameter", "The request must contain the parameter ReceiptHandle.")
	}
	for i, m := range q.messages {
		if m.receipt == handle {
			q.messages = append(q.messages[:i], q.messages[i+1:]...)
			s.sqs.deleted = append(s.sqs.deleted, m.id)
			return nil
		}
	}
	if s.sqs.handles[handle] {
		return nil
	}
	return errBadReceipt(handle)
}

// rememberHandles notes the handles given, so that deleting a message twice
// is told from a handle the fake never gave.
func (s *Server) rememberHandlesLocked(q *sqsQueue) {
	if s.sqs.handles == nil {
		s.sqs.handles = map[string]bool{}
	}
	for _, m := range q.messages {
		if m.receipt != "" {
			s.sqs.handles[m.receipt] = true
		}
	}
}

func (s *Server) sqsDeleteMessage(_ *http.Request, body []byte) (any, *apiError) {
	var in struct{ QueueUrl, ReceiptHandle string } //nolint:revive // the API's spelling
	_ = json.Unmarshal(body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueByURLLocked(in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	s.rememberHandlesLocked(q)
	if aerr := s.deleteLocked(q, in.ReceiptHandle); aerr != nil {
		return nil, aerr
	}
	return struct{}{}, nil
}

func (s *Server) sqsDeleteMessageBatch(_ *http.Request, body []byte) (any, *apiError) {
	var in struct {
		QueueUrl string //nolint:revive // the API's spelling
		Entries  []struct{ Id, ReceiptHandle string }
	}
	_ = json.Unmarshal(body, &in)
	s.mu.Lock()
	defer s.mu.Unlock()
	q, aerr := s.queueByURLLocked(in.QueueUrl)
	if aerr != nil {
		return nil, aerr
	}
	switch {
	case len(in.Entries) == 0:
		return nil, sqsError(http.StatusBadRequest, "EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", "There should be at least one DeleteMessageBatchRequestEntry in the request.")
	case len(in.Entries) > 10:
		return nil, sqsError(http.StatusBadRequest, "TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", "Maximum number of entries per request are 10. You have sent %d.", len(in.Entries))
	}
	ids := map[string]bool{}
	for _, e := range in.Entries {
		if ids[e.Id] {
			return nil, sqsError(http.StatusBadRequest, "BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", "Id %s repeated.", e.Id)
		}
		ids[e.Id] = true
	}
	s.rememberHandlesLocked(q)
	type okEntry struct{ Id string } //nolint:revive // the API's spelling
	type failEntry struct {
		Id, Code, Message string
		SenderFault       bool
	} //nolint:revive // the API's spelling
	out := struct {
		Successful []okEntry
		Failed     []failEntry
	}{Successful: []okEntry{}, Failed: []failEntry{}}
	for _, e := range in.Entries {
		if aerr := s.deleteLocked(q, e.ReceiptHandle); aerr != nil {
			code, _, _ := strings.Cut(aerr.code, "|")
			out.Failed = append(out.Failed, failEntry{Id: e.Id, Code: code, Message: aerr.message, SenderFault: true})
			continue
		}
		out.Successful = append(out.Successful, okEntry{Id: e.Id})
	}
	return out, nil
}

// QueueMessages returns the bodies of a queue's messages not deleted yet,
// visible or not, in send order.
func (s *Server) QueueMessages(queue string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.sqs.queues[queue]
	if q == nil {
		return nil
	}
	out := make([]string, 0, len(q.messages))
	for _, m := range q.messages {
		out = append(out, m.body)
	}
	return out
}

// DeletedMessages returns the IDs of the messages deleted, in order.
func (s *Server) DeletedMessages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.sqs.deleted...)
}

// sqsState is what the fake holds of SQS.
type sqsState struct {
	queues  map[string]*sqsQueue
	deleted []string        // IDs of the messages deleted, in order
	handles map[string]bool // every receipt handle given
}
