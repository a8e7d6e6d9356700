package awsfake

import (
	"net/http"
	"sort"
	"strings"
)

// Deny refuses the actions (by their API names, e.g. "DescribeSubnets"), as
// AWS does for a caller whose policy lacks them: Auto Scaling answers 403
// AccessDenied, EC2 403 UnauthorizedOperation, each in its own error
// envelope, EKS 403 AccessDeniedException. Deny() with no action allows
// everything again.
func (s *Server) Deny(actions ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deny = map[string]bool{}
	for _, a := range actions {
		s.deny[a] = true
	}
}

// AllowOnly refuses every action the fake serves except those of an IAM
// policy's action list ("autoscaling:SetDesiredCapacity",
// "ec2:DescribeInstanceTypes", ...; actions of other services, and actions
// the fake does not serve, are ignored). It returns the actions it refuses,
// sorted.
func (s *Server) AllowOnly(policyActions ...string) []string {
	allowed := map[string]bool{}
	for _, a := range policyActions {
		svc, name, ok := strings.Cut(a, ":")
		if ok {
			allowed[svc+":"+name] = true
		}
	}
	var refused []string
	for svc, handlers := range actions {
		for name := range handlers {
			if !allowed[svc+":"+name] {
				refused = append(refused, name)
			}
		}
	}
	for svc, names := range restActions {
		for _, name := range names {
			if !allowed[svc+":"+name] {
				refused = append(refused, name)
			}
		}
	}
	sort.Strings(refused)
	s.Deny(refused...)
	return refused
}

// denied answers a refused action as its service does.
func (s *Server) denied(svc, action string) *apiError {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.deny[action] {
		return nil
	}
	caller := "arn:aws:sts::" + accountID + ":assumed-role/cluster-autoscaler/awsfake"
	if svc == svcEKS {
		return &apiError{status: http.StatusForbidden, code: "AccessDeniedException",
			message: "User: " + caller + " is not authorized to perform: eks:" + action + " on resource: arn:aws:eks:" +
				s.region + ":" + accountID + ":cluster/*"}
	}
	if svc == svcEC2 {
		return &apiError{status: http.StatusForbidden, code: "UnauthorizedOperation",
			message: "You are not authorized to perform this operation. User: " + caller + " is not authorized to perform: ec2:" +
				action + " because no identity-based policy allows the ec2:" + action + " action"}
	}
	return &apiError{status: http.StatusForbidden, code: "AccessDenied",
		message: "User: " + caller + " is not authorized to perform: autoscaling:" + action +
			" because no identity-based policy allows the autoscaling:" + action + " action"}
}
