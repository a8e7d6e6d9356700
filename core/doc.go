// Package core owns the autoscaler's loop: Autoscaler.RunOnce as a list of
// named steps, the Runner that triggers it, and the liveness it reports on
// /health-check. Decisions live in the step packages it calls; core itself
// must not import a concrete cloud provider or package main.
package core
