package awsfake

import (
	"encoding/json"
	"time"
)

// EventBridge events as the rules of an interruption queue deliver them to
// SQS: the event's JSON document is the message body. The fake plays the
// rules: a test calls one of the Send* methods and the event lands on the
// queue (created when missing).

// The detail-types of the events the fake sends.
const (
	DetailSpotInterruption = "EC2 Spot Instance Interruption Warning"
	DetailRebalance        = "EC2 Instance Rebalance Recommendation"
	DetailStateChange      = "EC2 Instance State-change Notification"
	DetailHealth           = "AWS Health Event"
)

// event is an EventBridge event's envelope.
type event struct {
	Version    string   `json:"version"`
	ID         string   `json:"id"`
	DetailType string   `json:"detail-type"`
	Source     string   `json:"source"`
	Account    string   `json:"account"`
	Time       string   `json:"time"`
	Region     string   `json:"region"`
	Resources  []string `json:"resources"`
	Detail     any      `json:"detail"`
}

func (s *Server) newEvent(detailType, source string, resources []string, detail any) string {
	e := event{Version: "0", ID: newRequestID(), DetailType: detailType, Source: source, Account: accountID,
		Time: s.now().UTC().Format(time.RFC3339), Region: s.region, Resources: resources, Detail: detail}
	if e.Resources == nil {
		e.Resources = []string{}
	}
	raw, _ := json.Marshal(e)
	return string(raw)
}

func (s *Server) instanceARN(id string) string {
	return "arn:aws:ec2:" + s.region + ":" + accountID + ":instance/" + id
}

// SendSpotInterruption sends the two-minute warning of a Spot instance
// (instance-action "terminate"); it returns the message's ID.
func (s *Server) SendSpotInterruption(queue, instanceID string) string {
	return s.SendSpotInterruptionAction(queue, instanceID, "terminate")
}

// SendSpotInterruptionAction sends the warning with another
// instance-action ("stop", "hibernate").
func (s *Server) SendSpotInterruptionAction(queue, instanceID, action string) string {
	body := s.newEvent(DetailSpotInterruption, "aws.ec2", []string{s.instanceARN(instanceID)},
		map[string]string{"instance-id": instanceID, "instance-action": action})
	return s.SendMessage(queue, body)
}

// SendRebalance sends a rebalance recommendation for an instance.
func (s *Server) SendRebalance(queue, instanceID string) string {
	body := s.newEvent(DetailRebalance, "aws.ec2", []string{s.instanceARN(instanceID)},
		map[string]string{"instance-id": instanceID})
	return s.SendMessage(queue, body)
}

// SendStateChange sends an instance's state change (pending, running,
// stopping, stopped, shutting-down, terminated).
func (s *Server) SendStateChange(queue, instanceID, state string) string {
	body := s.newEvent(DetailStateChange, "aws.ec2", []string{s.instanceARN(instanceID)},
		map[string]string{"instance-id": instanceID, "state": state})
	return s.SendMessage(queue, body)
}

// SendScheduledChange sends an AWS Health event of the scheduledChange
// category for EC2 (eventTypeCode such as
// AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED) naming the instances as its
// affected entities, starting at start.
func (s *Server) SendScheduledChange(queue, eventTypeCode string, start time.Time, instanceIDs ...string) string {
	type entity struct {
		EntityValue string `json:"entityValue"`
	}
	type description struct {
		Language          string `json:"language"`
		LatestDescription string `json:"latestDescription"`
	}
	entities := make([]entity, 0, len(instanceIDs))
	resources := make([]string, 0, len(instanceIDs))
	for _, id := range instanceIDs {
		entities = append(entities, entity{EntityValue: id})
		resources = append(resources, id)
	}
	detail := struct {
		EventArn          string        `json:"eventArn"`
		Service           string        `json:"service"`
		EventTypeCode     string        `json:"eventTypeCode"`
		EventTypeCategory string        `json:"eventTypeCategory"`
		StartTime         string        `json:"startTime"`
		EventDescription  []description `json:"eventDescription"`
		AffectedEntities  []entity      `json:"affectedEntities"`
	}{
		EventArn: "arn:aws:health:" + s.region + "::event/EC2/" + eventTypeCode + "/" + eventTypeCode + "_" + randomHex(8),
		Service:  "EC2", EventTypeCode: eventTypeCode, EventTypeCategory: "scheduledChange",
		StartTime:        start.UTC().Format("Mon, 02 Jan 2006 15:04:05 GMT"),
		EventDescription: []description{{Language: "en_US", LatestDescription: "EC2 has scheduled a change for the instances."}},
		AffectedEntities: entities,
	}
	return s.SendMessage(queue, s.newEvent(DetailHealth, "aws.health", resources, detail))
}
