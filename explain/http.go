package explain

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Handler serves /explainz from the recorder: ?pod=ns/name, ?node=name or
// ?provisioningrequest=ns/name; text by default, JSON with ?format=json.
// It only reads.
func (r *Recorder) Handler() http.Handler {
	return http.HandlerFunc(r.serve)
}

func (r *Recorder) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodGet && req.Method != http.MethodHead {
		http.Error(w, "only GET", http.StatusMethodNotAllowed)
		return
	}
	q := req.URL.Query()
	asJSON := q.Get("format") == "json"
	if r.At().IsZero() {
		http.Error(w, "no loop has completed yet; ask again after the first loop", http.StatusServiceUnavailable)
		return
	}
	switch {
	case q.Get("pod") != "":
		r.servePod(w, q.Get("pod"), asJSON)
	case q.Get("node") != "":
		r.serveNode(w, q.Get("node"), asJSON)
	case q.Get("provisioningrequest") != "":
		r.serveRequest(w, q.Get("provisioningrequest"), asJSON)
	default:
		http.Error(w, "ask for one of ?pod=<namespace>/<name>, ?node=<name>, ?provisioningrequest=<namespace>/<name> "+
			"(add &format=json for JSON)", http.StatusBadRequest)
	}
}

func (r *Recorder) servePod(w http.ResponseWriter, pod string, asJSON bool) {
	if !strings.Contains(pod, "/") {
		http.Error(w, fmt.Sprintf("pod %q: want <namespace>/<name>", pod), http.StatusBadRequest)
		return
	}
	g, at, ok := r.Pod(pod)
	if !ok {
		http.Error(w, fmt.Sprintf("pod %s was not among the pending pods the last loop (at %s) considered for scale-up: "+
			"it may be scheduled, not yet marked unschedulable by the scheduler, too new (--new-pod-scale-up-delay), "+
			"set aside by a processor, or not exist",
			pod, at.UTC().Format(time.RFC3339)), http.StatusNotFound)
		return
	}
	if asJSON {
		writeJSON(w, struct {
			At time.Time `json:"at"`
			PodGroup
		}{at, g})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_ = WritePodGroup(w, g, at)
}

func (r *Recorder) serveNode(w http.ResponseWriter, node string, asJSON bool) {
	v, note, at, ok := r.Node(node)
	if !ok {
		msg := fmt.Sprintf("node %s has no scale-down verdict in the last loop (at %s)", node, at.UTC().Format(time.RFC3339))
		if note != "" {
			msg += ": " + note
		}
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	if asJSON {
		writeJSON(w, struct {
			At        time.Time `json:"at"`
			ScaleDown string    `json:"scaleDown,omitempty"`
			NodeVerdict
		}{at, note, v})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_ = WriteNode(w, v, note, at)
}

func (r *Recorder) serveRequest(w http.ResponseWriter, req string, asJSON bool) {
	gs, at := r.Request(req)
	conds := r.RequestConditions(req)
	if len(gs) == 0 && len(conds) == 0 {
		http.Error(w, fmt.Sprintf("ProvisioningRequest %s had no pods in the last loop's scale-up (at %s): "+
			"it may be provisioned already, failed, not exist, or not be handled by this autoscaler's classes",
			req, at.UTC().Format(time.RFC3339)), http.StatusNotFound)
		return
	}
	if asJSON {
		writeJSON(w, struct {
			At         time.Time   `json:"at"`
			Conditions []Condition `json:"conditions,omitempty"`
			PodGroups  []PodGroup  `json:"podGroups"`
		}{at, conds, gs})
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_ = WriteRequest(w, conds, gs, at)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
