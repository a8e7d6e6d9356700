package config

import (
	"strings"
	"testing"
)

// TestExplainAddressDefaultsToLoopback: /explainz has a listener of its own
// on loopback, and is not on the metrics port, unless flags say otherwise.
func TestExplainAddressDefaultsToLoopback(t *testing.T) {
	o := Defaults()
	if o.ExplainAddress != "127.0.0.1:8087" || o.ExplainOnMetricsPort {
		t.Errorf("defaults: --explain-address %q, --explain-on-metrics-port %v; want 127.0.0.1:8087 and false",
			o.ExplainAddress, o.ExplainOnMetricsPort)
	}
}

// TestValidateExplainAddress: a bad --explain-address is a start-up error
// naming the flag; "" (no listener), any host with a port, and port 0 pass.
func TestValidateExplainAddress(t *testing.T) {
	for _, tc := range []struct {
		address, explain string
		wantErr          string // "" for valid
	}{
		{":8085", "127.0.0.1:8087", ""},
		{":8085", "", ""},
		{":8085", "[::1]:8087", ""},
		{":8085", "localhost:8087", ""},
		{":8085", ":8087", ""},
		{"127.0.0.1:0", "127.0.0.1:0", ""},
		{"10.0.0.1:8085", "127.0.0.1:8085", ""},
		{":8085", "8087", "want host:port"},
		{":8085", "127.0.0.1", "want host:port"},
		{":8085", "127.0.0.1:http", `port "http"`},
		{":8085", "127.0.0.1:70000", `port "70000"`},
		{":8085", "127.0.0.1:-1", `port "-1"`},
		{":8085", "127.0.0.1:8085", "has the port of --address"},
		{"127.0.0.1:9000", "127.0.0.1:9000", "has the port of --address"},
		{"127.0.0.1:9000", "0.0.0.0:9000", "has the port of --address"},
		{"127.0.0.1:9000", "[::]:9000", "has the port of --address"},
	} {
		o := Defaults()
		o.Address, o.ExplainAddress = tc.address, tc.explain
		err := o.Validate()
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("--address=%q --explain-address=%q refused: %v", tc.address, tc.explain, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), "--explain-address: ") ||
			!strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("--address=%q --explain-address=%q: %v, want an --explain-address error with %q",
				tc.address, tc.explain, err, tc.wantErr)
		}
	}
}
