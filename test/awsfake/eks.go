package awsfake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
)

// EKS is a REST-JSON API: the operation is the method and path, answers
// and errors are JSON, the error's code is in the X-Amzn-ErrorType header.
// The fake serves DescribeNodegroup only:
// GET /clusters/{name}/node-groups/{nodegroupName}.
const svcEKS = "eks"

// restActions are the actions of the REST-JSON services the fake serves,
// by service (AllowOnly refuses them like the query-protocol ones).
var restActions = map[string][]string{svcEKS: {"DescribeNodegroup"}}

// EKSNodegroup is an EKS managed node group, as DescribeNodegroup tells it.
type EKSNodegroup struct {
	Cluster string
	Name    string
	// CapacityType is ON_DEMAND (the default when empty), SPOT or
	// CAPACITY_BLOCK; any other value is answered as it is.
	CapacityType string
	Labels       map[string]string
	// Taints' effects are spelt as the EKS API spells them: NO_SCHEDULE,
	// NO_EXECUTE, PREFER_NO_SCHEDULE (anything else is answered as it is,
	// so a test can check what a client makes of a bad reply).
	Taints []EKSTaint
	// AutoScalingGroups are the groups EKS made for the node group (the
	// first one's sizes are the answer's scalingConfig when the fake has it).
	AutoScalingGroups []string
	InstanceTypes     []string
}

// EKSTaint is a taint of a managed node group.
type EKSTaint struct {
	Key, Value, Effect string
}

// AddNodegroup registers (or replaces) a managed node group.
func (s *Server) AddNodegroup(ng EKSNodegroup) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nodegroups == nil {
		s.nodegroups = map[string]EKSNodegroup{}
	}
	labels := make(map[string]string, len(ng.Labels))
	for k, v := range ng.Labels {
		labels[k] = v
	}
	ng.Labels = labels
	ng.Taints = append([]EKSTaint(nil), ng.Taints...)
	ng.AutoScalingGroups = append([]string(nil), ng.AutoScalingGroups...)
	ng.InstanceTypes = append([]string(nil), ng.InstanceTypes...)
	s.nodegroups[ng.Cluster+"/"+ng.Name] = ng
}

// Nodegroup returns a registered managed node group (a copy).
func (s *Server) Nodegroup(cluster, name string) (EKSNodegroup, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ng, ok := s.nodegroups[cluster+"/"+name]
	if !ok {
		return EKSNodegroup{}, false
	}
	labels := make(map[string]string, len(ng.Labels))
	for k, v := range ng.Labels {
		labels[k] = v
	}
	ng.Labels = labels
	ng.Taints = append([]EKSTaint(nil), ng.Taints...)
	ng.AutoScalingGroups = append([]string(nil), ng.AutoScalingGroups...)
	ng.InstanceTypes = append([]string(nil), ng.InstanceTypes...)
	return ng, true
}

// RemoveNodegroup forgets a managed node group (DescribeNodegroup then
// answers ResourceNotFoundException).
func (s *Server) RemoveNodegroup(cluster, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.nodegroups, cluster+"/"+name)
}

// isEKSPath tells a request of the EKS REST API from a query-protocol one.
func isEKSPath(path string) bool { return strings.HasPrefix(path, "/clusters/") }

// serveEKS answers a request of the EKS REST API.
func (s *Server) serveEKS(w http.ResponseWriter, r *http.Request) {
	reqID := newRequestID()
	cluster, name, ok := nodegroupPath(r.URL)
	if !ok {
		writeEKSError(w, reqID, &apiError{status: http.StatusNotFound, code: "UnknownOperationException",
			message: "No operation matches " + r.Method + " " + r.URL.Path})
		return
	}
	if r.Method != http.MethodGet {
		writeEKSError(w, reqID, &apiError{status: http.StatusMethodNotAllowed, code: "UnknownOperationException",
			message: "only DescribeNodegroup (GET) is served on " + r.URL.Path})
		return
	}
	const action = "DescribeNodegroup"
	if aerr := s.checkAuth(r.Header.Get("Authorization"), svcEKS); aerr != nil {
		writeEKSError(w, reqID, aerr)
		return
	}
	if aerr := s.countAndThrottle(action, svcEKS, isRetry(r.Header.Get("amz-sdk-request"))); aerr != nil {
		// EKS throttles with 429 ThrottlingException.
		writeEKSError(w, reqID, &apiError{status: http.StatusTooManyRequests, code: "ThrottlingException", message: "Rate exceeded"})
		return
	}
	if aerr := s.denied(svcEKS, action); aerr != nil {
		writeEKSError(w, reqID, aerr)
		return
	}
	s.runBeforeCall(action)
	body, aerr := s.describeNodegroup(cluster, name)
	if aerr != nil {
		writeEKSError(w, reqID, aerr)
		return
	}
	out, err := json.Marshal(body)
	if err != nil {
		writeEKSError(w, reqID, &apiError{status: http.StatusInternalServerError, code: "ServerException", message: err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-RequestId", reqID)
	_, _ = w.Write(out)
}

// nodegroupPath reads /clusters/{name}/node-groups/{nodegroupName}, each
// segment percent-decoded.
func nodegroupPath(u *url.URL) (cluster, name string, ok bool) {
	parts := strings.Split(strings.TrimPrefix(u.EscapedPath(), "/"), "/")
	if len(parts) != 4 || parts[0] != "clusters" || parts[2] != "node-groups" {
		return "", "", false
	}
	cluster, err1 := url.PathUnescape(parts[1])
	name, err2 := url.PathUnescape(parts[3])
	if err1 != nil || err2 != nil || cluster == "" || name == "" {
		return "", "", false
	}
	return cluster, name, true
}

// The answer's shapes (DescribeNodegroupResponse of the EKS API reference;
// the fields a client may read, timestamps as epoch seconds).
type eksTaintJSON struct {
	Key    string `json:"key,omitempty"`
	Value  string `json:"value,omitempty"`
	Effect string `json:"effect,omitempty"`
}

type eksNodegroupJSON struct {
	NodegroupName  string            `json:"nodegroupName"`
	NodegroupArn   string            `json:"nodegroupArn"`
	ClusterName    string            `json:"clusterName"`
	Version        string            `json:"version"`
	ReleaseVersion string            `json:"releaseVersion"`
	CreatedAt      float64           `json:"createdAt"`
	ModifiedAt     float64           `json:"modifiedAt"`
	Status         string            `json:"status"`
	CapacityType   string            `json:"capacityType"`
	ScalingConfig  *eksScalingJSON   `json:"scalingConfig,omitempty"`
	InstanceTypes  []string          `json:"instanceTypes,omitempty"`
	Subnets        []string          `json:"subnets,omitempty"`
	AmiType        string            `json:"amiType"`
	NodeRole       string            `json:"nodeRole"`
	Labels         map[string]string `json:"labels,omitempty"`
	Taints         []eksTaintJSON    `json:"taints,omitempty"`
	Resources      eksResourcesJSON  `json:"resources"`
	Health         eksHealthJSON     `json:"health"`
	Tags           map[string]string `json:"tags"`
}

type eksScalingJSON struct {
	MinSize     int `json:"minSize"`
	MaxSize     int `json:"maxSize"`
	DesiredSize int `json:"desiredSize"`
}

type eksResourcesJSON struct {
	AutoScalingGroups []eksNameJSON `json:"autoScalingGroups"`
}

type eksNameJSON struct {
	Name string `json:"name"`
}

type eksHealthJSON struct {
	Issues []any `json:"issues"`
}

// describeNodegroup answers DescribeNodegroup.
func (s *Server) describeNodegroup(cluster, name string) (any, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ng, ok := s.nodegroups[cluster+"/"+name]
	if !ok {
		known := false
		for _, other := range s.nodegroups {
			known = known || other.Cluster == cluster
		}
		msg := "No node group found for name: " + name + "."
		if !known {
			msg = "No cluster found for name: " + cluster + "."
		}
		return nil, &apiError{status: http.StatusNotFound, code: "ResourceNotFoundException", message: msg}
	}
	capacity := ng.CapacityType
	if capacity == "" {
		capacity = "ON_DEMAND"
	}
	created := float64(s.now().Add(-24 * 3600 * 1e9).Unix())
	out := eksNodegroupJSON{
		NodegroupName: ng.Name,
		NodegroupArn: fmt.Sprintf("arn:aws:eks:%s:%s:nodegroup/%s/%s/%s", s.region, accountID, ng.Cluster, ng.Name,
			"00000000-0000-0000-0000-000000000000"),
		ClusterName: ng.Cluster, Version: "1.31", ReleaseVersion: "1.31.0-20250101",
		CreatedAt: created, ModifiedAt: created, Status: "ACTIVE", CapacityType: capacity,
		InstanceTypes: ng.InstanceTypes, AmiType: "AL2023_x86_64_STANDARD",
		NodeRole: "arn:aws:iam::" + accountID + ":role/" + ng.Cluster + "-node", Labels: ng.Labels,
		Resources: eksResourcesJSON{AutoScalingGroups: []eksNameJSON{}}, Health: eksHealthJSON{Issues: []any{}},
		Tags: map[string]string{},
	}
	for _, t := range ng.Taints {
		out.Taints = append(out.Taints, eksTaintJSON(t))
	}
	for i, g := range ng.AutoScalingGroups {
		out.Resources.AutoScalingGroups = append(out.Resources.AutoScalingGroups, eksNameJSON{Name: g})
		if gs, ok := s.groups[g]; ok && i == 0 {
			out.ScalingConfig = &eksScalingJSON{MinSize: gs.Min, MaxSize: gs.Max, DesiredSize: gs.Desired}
			out.Subnets = append([]string(nil), gs.Subnets...)
			sort.Strings(out.Subnets)
		}
	}
	return struct {
		Nodegroup eksNodegroupJSON `json:"nodegroup"`
	}{out}, nil
}

// writeEKSError writes a REST-JSON error: the status, the code in
// X-Amzn-ErrorType, the message in the JSON body.
func writeEKSError(w http.ResponseWriter, reqID string, e *apiError) {
	out, _ := json.Marshal(struct {
		Message string `json:"message"`
	}{e.message})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("x-amzn-RequestId", reqID)
	w.Header().Set("X-Amzn-ErrorType", e.code)
	w.WriteHeader(e.status)
	_, _ = w.Write(out)
}
