package externalgrpc

import (
	"strings"
	"testing"
	"time"
)

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		yaml    string
		wantErr string
		timeout time.Duration
		tls     bool
	}{
		{name: "address only", yaml: "address: 127.0.0.1:8086", timeout: DefaultTimeout},
		{name: "ipv6 and timeout", yaml: "address: '[::1]:8086'\ngrpc_timeout: 1m30s", timeout: 90 * time.Second},
		{name: "resolver target", yaml: "address: dns:///provider.example:443", timeout: DefaultTimeout},
		{name: "mTLS", yaml: "address: a:1\nkey: k\ncert: c\ncacert: ca", timeout: DefaultTimeout, tls: true},
		{name: "no address", yaml: "grpc_timeout: 5s", wantErr: "address is required"},
		{name: "empty file", yaml: "", wantErr: "address is required"},
		{name: "no port", yaml: "address: localhost", wantErr: "not host:port"},
		{name: "two TLS files", yaml: "address: a:1\nkey: k\ncert: c", wantErr: "all three"},
		{name: "cacert only", yaml: "address: a:1\ncacert: ca", wantErr: "all three"},
		{name: "unknown key", yaml: "address: a:1\ntimeout: 5s", wantErr: "unknown field"},
		{name: "number timeout", yaml: "address: a:1\ngrpc_timeout: 5", wantErr: "duration"},
		{name: "bad timeout", yaml: "address: a:1\ngrpc_timeout: soon", wantErr: "duration"},
		{name: "negative timeout", yaml: "address: a:1\ngrpc_timeout: -1s", wantErr: "must be positive"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tc.yaml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Timeout.Duration != tc.timeout || c.TLS() != tc.tls {
				t.Errorf("timeout %v tls %v, want %v %v", c.Timeout.Duration, c.TLS(), tc.timeout, tc.tls)
			}
		})
	}
}
