package aws

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/cloudprovider"
)

// ebEvent is the envelope of an EventBridge event as a rule delivers it
// to SQS (the message body is the event).
type ebEvent struct {
	DetailType string          `json:"detail-type"`
	Source     string          `json:"source"`
	Time       string          `json:"time"`
	Detail     json.RawMessage `json:"detail"`
}

// ec2Detail is the detail of the EC2 events: the instance, and the
// interruption's action or the new state.
type ec2Detail struct {
	InstanceID     string `json:"instance-id"`
	InstanceAction string `json:"instance-action"`
	State          string `json:"state"`
}

// healthDetail is the part of an AWS Health event's detail read here.
type healthDetail struct {
	Service           string `json:"service"`
	EventTypeCode     string `json:"eventTypeCode"`
	EventTypeCategory string `json:"eventTypeCategory"`
	StartTime         string `json:"startTime"`
	AffectedEntities  []struct {
		EntityValue string `json:"entityValue"`
	} `json:"affectedEntities"`
}

// goingStates are the instance states a state-change notice is acted on
// for: the instance is on its way out.
var goingStates = map[string]bool{"stopping": true, "stopped": true, "shutting-down": true, "terminated": true}

// parseEvent reads a message body: the notices it carries (instances by
// their bare ID), or why it is dropped.
func parseEvent(body string, rebalance bool) ([]cloudprovider.InterruptionNotice, *cloudprovider.DroppedNotice) {
	var e ebEvent
	if err := json.Unmarshal([]byte(body), &e); err != nil || e.DetailType == "" || len(e.Detail) == 0 {
		return nil, &cloudprovider.DroppedNotice{Kind: dropUnknown, Action: dropMalformed, Detail: "not an EventBridge event"}
	}
	sent, _ := time.Parse(time.RFC3339, e.Time)
	malformed := func(kind cloudprovider.InterruptionKind, why string) *cloudprovider.DroppedNotice {
		return &cloudprovider.DroppedNotice{Kind: string(kind), Action: dropMalformed, Detail: e.DetailType + ": " + why}
	}
	switch {
	case e.Source == "aws.ec2" && e.DetailType == detailSpot:
		d, ok := ec2DetailOf(e.Detail)
		if !ok {
			return nil, malformed(cloudprovider.SpotInterruption, "no instance-id")
		}
		n := cloudprovider.InterruptionNotice{Kind: cloudprovider.SpotInterruption, Instance: d.InstanceID, Time: sent,
			Detail: fmt.Sprintf("Spot interruption warning (instance-action %s)", orDash(d.InstanceAction))}
		if !sent.IsZero() {
			n.Deadline = sent.Add(spotWarning)
		}
		return []cloudprovider.InterruptionNotice{n}, nil
	case e.Source == "aws.ec2" && e.DetailType == detailRebalance:
		d, ok := ec2DetailOf(e.Detail)
		if !ok {
			return nil, malformed(cloudprovider.Rebalance, "no instance-id")
		}
		if !rebalance {
			return nil, &cloudprovider.DroppedNotice{Kind: string(cloudprovider.Rebalance), Action: dropIgnored,
				Detail: "rebalance recommendation for " + d.InstanceID + ": not acted on without --aws-interruption-rebalance"}
		}
		return []cloudprovider.InterruptionNotice{{Kind: cloudprovider.Rebalance, Instance: d.InstanceID, Time: sent,
			Detail: "rebalance recommendation (higher risk of a Spot interruption)"}}, nil
	case e.Source == "aws.ec2" && e.DetailType == detailState:
		d, ok := ec2DetailOf(e.Detail)
		if !ok || d.State == "" {
			return nil, malformed(cloudprovider.StateChange, "no instance-id or state")
		}
		if !goingStates[d.State] {
			return nil, &cloudprovider.DroppedNotice{Kind: string(cloudprovider.StateChange), Action: dropIgnored,
				Detail: "instance " + d.InstanceID + " is " + d.State}
		}
		return []cloudprovider.InterruptionNotice{{Kind: cloudprovider.StateChange, Instance: d.InstanceID, Time: sent,
			Detail: "instance state " + d.State}}, nil
	case e.Source == "aws.health" && e.DetailType == detailHealth:
		return parseHealth(e, sent)
	}
	return nil, &cloudprovider.DroppedNotice{Kind: dropUnknown, Action: dropUnknown,
		Detail: fmt.Sprintf("event %q from %q is not one the autoscaler acts on", e.DetailType, e.Source)}
}

// parseHealth reads an AWS Health event: a scheduled change of EC2
// (retirement, maintenance, reboot) for the instances it names.
func parseHealth(e ebEvent, sent time.Time) ([]cloudprovider.InterruptionNotice, *cloudprovider.DroppedNotice) {
	var d healthDetail
	if err := json.Unmarshal(e.Detail, &d); err != nil {
		return nil, &cloudprovider.DroppedNotice{Kind: string(cloudprovider.ScheduledChange), Action: dropMalformed, Detail: "AWS Health event: bad detail"}
	}
	if d.Service != "EC2" || d.EventTypeCategory != "scheduledChange" {
		return nil, &cloudprovider.DroppedNotice{Kind: string(cloudprovider.ScheduledChange), Action: dropIgnored,
			Detail: fmt.Sprintf("AWS Health event of %s, category %s", orDash(d.Service), orDash(d.EventTypeCategory))}
	}
	start, _ := http.ParseTime(d.StartTime)
	var out []cloudprovider.InterruptionNotice
	for _, a := range d.AffectedEntities {
		if !strings.HasPrefix(a.EntityValue, "i-") {
			continue
		}
		out = append(out, cloudprovider.InterruptionNotice{Kind: cloudprovider.ScheduledChange, Instance: a.EntityValue,
			Time: sent, Deadline: start, Detail: "AWS Health scheduled change " + orDash(d.EventTypeCode)})
	}
	if len(out) == 0 {
		return nil, &cloudprovider.DroppedNotice{Kind: string(cloudprovider.ScheduledChange), Action: dropMalformed,
			Detail: "AWS Health event naming no instance"}
	}
	return out, nil
}

func ec2DetailOf(raw json.RawMessage) (ec2Detail, bool) {
	var d ec2Detail
	if err := json.Unmarshal(raw, &d); err != nil || !strings.HasPrefix(d.InstanceID, "i-") {
		return ec2Detail{}, false
	}
	return d, true
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
