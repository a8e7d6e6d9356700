package config

import (
	"net"
	"strconv"
)

// validateExplain checks --explain-address: "" (no listener of its own) or
// host:port with a numeric port, not the port of --address (two listeners
// cannot share it; --explain-on-metrics-port serves /explainz there).
func (o *Options) validateExplain(v *validator) {
	if o.ExplainAddress == "" {
		return
	}
	const flag = "--explain-address"
	host, port, err := net.SplitHostPort(o.ExplainAddress)
	if err != nil {
		v.add(flag, "want host:port such as %s, or \"\" for no listener of its own, got %q", DefaultExplainAddress, o.ExplainAddress)
		return
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		v.add(flag, "port %q of %q is not a number from 0 to 65535", port, o.ExplainAddress)
		return
	}
	mhost, mport, err := net.SplitHostPort(o.Address)
	if err == nil && n != 0 && mport == port && hostsOverlap(host, mhost) {
		v.add(flag, "%q has the port of --address (%q); to serve /explainz on that port use --explain-on-metrics-port, "+
			"and set --explain-address to another port or \"\"", o.ExplainAddress, o.Address)
	}
}

// hostsOverlap tells whether listeners on hosts a and b of one port would
// collide: the same host, or either one every interface.
func hostsOverlap(a, b string) bool {
	every := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || (ip != nil && ip.IsUnspecified())
	}
	return a == b || every(a) || every(b)
}
