// Package config holds the autoscaler's options as plain data: the Options
// value that the command line fills, its upstream-compatible defaults, and its
// validation. It does no I/O and must not import client-go, the cloud
// providers or anything under core/.
package config
