package awsfake

import (
	"strings"
	"time"
)

// StatusForm is how the status message of a failed launch's scaling
// activity words EC2's error, as Auto Scaling writes it for a group of
// that kind.
type StatusForm int

const (
	// FleetOnDemand (the default): "Could not launch On-Demand Instances.
	// <code> - <message>. Launching EC2 instance failed.", as for groups
	// with a mixed-instances policy launching On-Demand capacity.
	FleetOnDemand StatusForm = iota
	// FleetSpot: "Could not launch Spot Instances. <code> - <message>.
	// Launching EC2 instance failed.", the same for Spot capacity.
	FleetSpot
	// Plain: "<message>. Launching EC2 instance failed.", EC2's message
	// without its code, as for groups launching from a launch template or
	// configuration without a mixed-instances policy (e.g. "We currently do
	// not have sufficient m5.large capacity in the Availability Zone you
	// requested (us-east-1a). Our system will be working on provisioning
	// additional capacity. ... Launching EC2 instance failed.").
	Plain
)

// LaunchFailure is how a group's launches fail: EC2's error code and
// message, and the form of the activity's status message.
type LaunchFailure struct {
	Code, Message string
	Form          StatusForm
}

// statusMessage is the failed activity's StatusMessage.
func (f *launchFailure) statusMessage() string {
	msg := strings.TrimSuffix(strings.TrimSpace(f.message), ".") + "."
	const tail = " Launching EC2 instance failed."
	switch f.form {
	case FleetSpot:
		return "Could not launch Spot Instances. " + f.code + " - " + msg + tail
	case Plain:
		return msg + tail
	default:
		return "Could not launch On-Demand Instances. " + f.code + " - " + msg + tail
	}
}

// FailLaunches makes the group's launches fail with the given EC2 error code
// and message, worded in the FleetOnDemand form: each attempt is a scaling
// activity with StatusCode Failed; the desired capacity stays and no
// instance appears. An empty code lets launches succeed again.
func (s *Server) FailLaunches(group, code, message string) {
	s.FailLaunchesWith(group, LaunchFailure{Code: code, Message: message})
}

// FailLaunchesWith is FailLaunches with the form of the status message.
func (s *Server) FailLaunchesWith(group string, f LaunchFailure) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.groups[group]
	if !ok {
		return
	}
	if f.Code == "" {
		g.failure = nil
	} else {
		g.failure = &launchFailure{code: f.Code, message: f.Message, form: f.Form}
		g.lastFail = time.Time{}
	}
	s.reconcileLocked()
}
