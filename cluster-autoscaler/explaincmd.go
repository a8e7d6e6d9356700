package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"k8s.io/autoscaler/cluster-autoscaler/explain/command"
)

// explainUsage is the subcommand's synopsis.
const explainUsage = "usage: cluster-autoscaler explain [--snapshot DUMP.json] (pod NAMESPACE/NAME | node NAME | provisioningrequest NAMESPACE/NAME | -f MANIFESTS.yaml) [-o text|json] [the autoscaler's flags]"

// runExplainCommand runs `cluster-autoscaler explain KIND NAME [flags]`:
// one loop, simulated with the autoscaler's flags on the live cluster
// through clients that cannot write, and the verdict on the object asked
// about. Exit codes: 0 explained, 1 failed or not explained, 2 bad usage.
func runExplainCommand(args []string, stdout, stderr io.Writer) int {
	snapshot, args, err := snapshotArg(args)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: %v\n%s\n", err, explainUsage)
		return 2
	}
	if len(args) < 2 || (strings.HasPrefix(args[0], "-") && args[0] != "-f" && args[0] != "--filename") ||
		strings.HasPrefix(args[1], "-") {
		_, _ = fmt.Fprintln(stderr, explainUsage)
		return 2
	}
	q := command.Query{Kind: args[0], Name: args[1], Output: "text", Snapshot: snapshot}
	if q.Kind == "--filename" {
		q.Kind = "-f"
	}
	switch q.Kind {
	case "pod", "node", "provisioningrequest", "-f":
	default:
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: unknown kind %q\n%s\n", q.Kind, explainUsage)
		return 2
	}
	cl := newCommandLine()
	cl.fs.SetOutput(stderr)
	cl.fs.StringVarP(&q.Output, "output", "o", q.Output, "Output format of explain: text or json.")
	if err := cl.parse(args[2:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: invalid flags:\n%v\n", err)
		return 2
	}
	if q.Output != "text" && q.Output != "json" {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: -o %q: want text or json\n", q.Output)
		return 2
	}
	if err := cl.applyLogging(); err != nil {
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: invalid flags:\n%v\n", err)
		return 2
	}
	defer klog.Flush()
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), klog.Background()), 5*time.Minute)
	defer cancel()
	err = command.Run(ctx, cl.opts, q, stdout, stderr)
	switch {
	case errors.Is(err, command.ErrNotExplained):
		_, _ = fmt.Fprintln(stderr, strings.TrimSuffix(err.Error(), ": "+command.ErrNotExplained.Error()))
		return 1
	case err != nil:
		_, _ = fmt.Fprintf(stderr, "cluster-autoscaler explain: %v\n", err)
		return 1
	}
	return 0
}

// snapshotArg takes `--snapshot FILE` (or `--snapshot=FILE`) out of args,
// wherever it is.
func snapshotArg(args []string) (string, []string, error) {
	var path string
	rest := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--snapshot":
			if i+1 >= len(args) || args[i+1] == "" {
				return "", nil, errors.New("--snapshot needs a file")
			}
			path = args[i+1]
			i++
		case strings.HasPrefix(a, "--snapshot="):
			if path = strings.TrimPrefix(a, "--snapshot="); path == "" {
				return "", nil, errors.New("--snapshot needs a file")
			}
		default:
			rest = append(rest, a)
		}
	}
	return path, rest, nil
}
