package externalgrpc

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// DefaultTimeout bounds each call when grpc_timeout is not set.
const DefaultTimeout = 5 * time.Second

// Config is the --cloud-config file of the provider.
type Config struct {
	// Address is the server's host:port ([host]:port for IPv6), or any
	// target gRPC resolves (dns:///host:port, unix:///path).
	Address string `json:"address"`
	// Key, Cert and CACert are the client's key and certificate and the CA
	// that signed the server's certificate: all three for mTLS, or none for
	// plaintext.
	Key    string `json:"key,omitempty"`
	Cert   string `json:"cert,omitempty"`
	CACert string `json:"cacert,omitempty"`
	// Timeout bounds each call (YAML key grpc_timeout, a duration such as "5s").
	Timeout Duration `json:"grpc_timeout,omitempty"`
}

// Duration is a time.Duration written as a Go duration string ("5s", "1m30s").
type Duration struct{ time.Duration }

// UnmarshalJSON implements json.Unmarshaler.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration such as \"5s\", got %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	d.Duration = v
	return nil
}

// MarshalJSON implements json.Marshaler.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// TLS reports whether the config asks for mTLS.
func (c *Config) TLS() bool { return c.Key != "" }

// ParseConfig reads and validates a config; unknown keys are errors, so a
// misspelt key is not silently ignored.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(data, &c); err != nil {
		return nil, fmt.Errorf("parsing the externalgrpc config: %w", err)
	}
	if c.Timeout.Duration == 0 {
		c.Timeout.Duration = DefaultTimeout
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Validate checks the config.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case strings.TrimSpace(c.Address) == "":
		errs = append(errs, errors.New("address is required (host:port of the external gRPC cloud provider server)"))
	case !strings.Contains(c.Address, "://"):
		if _, port, err := net.SplitHostPort(c.Address); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("address %q is not host:port or [host]:port", c.Address))
		}
	}
	set := 0
	for _, f := range []string{c.Key, c.Cert, c.CACert} {
		if f != "" {
			set++
		}
	}
	if set != 0 && set != 3 {
		errs = append(errs, fmt.Errorf("key, cert and cacert must be given all three (mTLS) or none (plaintext); got key=%q cert=%q cacert=%q",
			c.Key, c.Cert, c.CACert))
	}
	if c.Timeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("grpc_timeout must be positive, got %v", c.Timeout.Duration))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid externalgrpc config: %w", err)
	}
	return nil
}
