// Command cluster-autoscaler is the project's only composition root: it parses
// the upstream-compatible flags into config.Options (flags.go), builds the
// clients, metrics, HTTP server and loop (wire.go), and runs them under leader
// election until SIGTERM (main.go). No other package reads flags or the
// environment.
package main
