package disruption

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
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
	// Outcome, at heal_end only, is how the heal ended: healed (replaced),
	// restored (failed before removing the node, which got its own state
	// back), cancelled (the node recovered and got its state back) or failed
	// (the node was removed, or could not be given its state back). Added
	// after the other fields: absent at heal_start.
	Outcome string `json:"outcome,omitempty"`
	// OutcomeReason, at heal_end only, is the reason of the heal's end
	// event (Replaced, Recovered, GroupAtMinimum, EvictionTimeout, ...).
	OutcomeReason string `json:"outcomeReason,omitempty"`
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

// hookRunner calls the hooks of a heal's phase outside the loop: a loop
// waits for them at most a short while (Options.HookWait) and goes on, the
// heal waiting in its phase until they have answered (each hook is bounded
// by its own timeout). A new leader calls the hooks of a phase whose answer
// was not recorded again: hooks are called at least once.
type hookRunner struct {
	mu    sync.Mutex
	calls map[string]*hookCall
	// observe, if set, gets how long the hooks of a phase took and whether they failed.
	observe func(phase string, took time.Duration, err error)
}

type hookCall struct {
	done chan struct{}
	err  error
}

// result starts the hooks of req's phase unless they are running already,
// waits for them at most wait, and reports whether they have answered and,
// if so, their error. A phase without hooks answers at once.
func (hr *hookRunner) result(ctx context.Context, hooks []Hook, req HookRequest, ignored func(string, error),
	wait time.Duration) (bool, error) {
	key := req.Node + "/" + req.Phase
	hr.mu.Lock()
	c := hr.calls[key]
	if c == nil {
		if !hooksFor(hooks, req) {
			hr.mu.Unlock()
			return true, nil
		}
		c = &hookCall{done: make(chan struct{})}
		if hr.calls == nil {
			hr.calls = map[string]*hookCall{}
		}
		hr.calls[key] = c
		// The calls outlive this loop (not its cancellation), each bounded
		// by its hook's timeout.
		callCtx := context.WithoutCancel(ctx)
		go func() {
			start := time.Now()
			c.err = callHooks(callCtx, hooks, req, ignored)
			if hr.observe != nil {
				hr.observe(req.Phase, time.Since(start), c.err)
			}
			close(c.done)
		}()
	}
	hr.mu.Unlock()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-c.done:
	case <-timer.C:
		return false, nil
	case <-ctx.Done():
		return false, nil
	}
	hr.mu.Lock()
	delete(hr.calls, key)
	hr.mu.Unlock()
	return true, c.err
}

// forget drops the answers of a heal that ended while its hooks ran.
func (hr *hookRunner) forget(node string) {
	hr.mu.Lock()
	defer hr.mu.Unlock()
	for k := range hr.calls {
		if strings.HasPrefix(k, node+"/") {
			delete(hr.calls, k)
		}
	}
}

// hooksFor reports whether some hook is called for req.
func hooksFor(hooks []Hook, req HookRequest) bool {
	for i := range hooks {
		if hooks[i].has(req.Phase) && (!req.ControlPlane || hooks[i].ControlPlane) {
			return true
		}
	}
	return false
}

// hookBudget is the longest the hooks of phase may take in all.
func hookBudget(hooks []Hook, phase string) time.Duration {
	var d time.Duration
	for i := range hooks {
		if hooks[i].has(phase) {
			d += hooks[i].Timeout.Duration
		}
	}
	return d
}
