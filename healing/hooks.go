package healing

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// HookRequest is the JSON document POSTed to a hook.
type HookRequest struct {
	Phase        string    `json:"phase"` // heal_start or heal_end
	Node         string    `json:"node"`
	NodeGroup    string    `json:"nodeGroup"`
	ProviderID   string    `json:"providerID"`
	Reason       string    `json:"reason"`
	ControlPlane bool      `json:"controlPlane"`
	Started      time.Time `json:"started"`
}

// callHooks POSTs req to every hook of its phase (control-plane nodes: only
// hooks with controlPlane), in order; the first failure of a hook with
// failurePolicy Fail is returned. Failures of Ignore hooks are reported
// through ignored.
func callHooks(ctx context.Context, hooks []Hook, req HookRequest, ignored func(name string, err error)) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	for i := range hooks {
		h := &hooks[i]
		if !h.has(req.Phase) || (req.ControlPlane && !h.ControlPlane) {
			continue
		}
		if err := h.call(ctx, body); err != nil {
			if h.FailurePolicy == "Ignore" {
				ignored(h.Name, err)
				continue
			}
			return fmt.Errorf("hook %s (%s): %w", h.Name, req.Phase, err)
		}
	}
	return nil
}

func (h *Hook) has(phase string) bool {
	for _, p := range h.Phases {
		if p == phase {
			return true
		}
	}
	return false
}

func (h *Hook) call(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, h.Timeout.Duration)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	transport := http.DefaultTransport.(*http.Transport).Clone()
	if h.roots != nil {
		transport.TLSClientConfig = &tls.Config{RootCAs: h.roots, MinVersion: tls.VersionTLS12}
	}
	client := &http.Client{Transport: transport, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("answered %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}

// hooksFor reports whether some hook is configured for control-plane nodes.
func hooksForControlPlane(hooks []Hook) bool {
	for _, h := range hooks {
		if h.ControlPlane {
			return true
		}
	}
	return false
}
