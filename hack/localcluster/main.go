// Command localcluster starts (up) or stops (down) the local control plane in
// a directory, for hack/local-up.sh, hack/local-down.sh and make demo.
//
//	localcluster up   --dir _output/local   # start detached, print the kubeconfig path
//	localcluster down --dir _output/local   # stop exactly the recorded processes
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/autoscaler/cluster-autoscaler/test/localcluster"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "up" && os.Args[1] != "down") {
		fmt.Fprintln(os.Stderr, "usage: localcluster up|down [--dir DIR] [--bin DIR] [--node-lease-seconds N]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "_output/local", "directory for the cluster's certificates, data, logs and state")
	bin := fs.String("bin", "_output/bin", "directory with the control-plane binaries")
	stages := fs.String("stages", "_output/kwok-stages", "directory with kwok's stage definitions")
	lease := fs.Int("node-lease-seconds", 40, "kwok node lease duration; 240 for thousands of nodes")
	_ = fs.Parse(os.Args[2:])
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return a
	}
	var err error
	if os.Args[1] == "up" {
		err = up(abs(*dir), abs(*bin), abs(*stages), *lease)
	} else {
		err = down(abs(*dir))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcluster:", err)
		os.Exit(1)
	}
}

func up(dir, bin, stages string, lease int) error {
	if c, err := localcluster.Attach(dir); err == nil && c.Running() {
		fmt.Printf("already running; kubeconfig: %s\n", c.Kubeconfig)
		return nil
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	c, err := localcluster.Start(ctx, localcluster.Config{BinDir: bin, StagesDir: stages, Dir: dir, Detach: true,
		NodeLeaseSeconds: lease})
	if err != nil {
		return err
	}
	fmt.Printf("control plane healthy in %.1fs; server %s\nkubeconfig: %s\nlogs: %s\n",
		time.Since(start).Seconds(), c.Server, c.Kubeconfig, filepath.Join(dir, "logs"))
	return nil
}

func down(dir string) error {
	c, err := localcluster.Attach(dir)
	if err != nil {
		if os.IsNotExist(err) || os.IsNotExist(unwrapAll(err)) {
			fmt.Println("no cluster recorded in", dir)
			return nil
		}
		return err
	}
	if err := c.Stop(); err != nil {
		return err
	}
	fmt.Println("stopped the control plane recorded in", dir)
	return nil
}

func unwrapAll(err error) error {
	for {
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			return err
		}
		err = u.Unwrap()
	}
}
