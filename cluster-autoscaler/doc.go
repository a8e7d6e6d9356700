// Command cluster-autoscaler is the command line: it parses the
// upstream-compatible flags into config.Options (flags.go, flagvalues.go,
// logging.go, healing.go for the healing flags), the `explain` subcommand's
// arguments (explaincmd.go), and calls the composition root, package
// builder, until SIGTERM (main.go); `explain` runs explain/command. It wires
// nothing itself. No other package reads flags or the environment.
package main
