// Command upstreamlist reads upstream's cluster autoscaler source at one
// commit of a git mirror and rewrites the generated part of
// cluster-autoscaler/testdata/upstream.txt: upstream's flags with their
// defaults, metric families, function-duration labels and event reasons,
// stamped with the commit. The hand-kept part of the file (the differences
// we keep on purpose, our additions) is left as it is; TestUpstreamList
// then says what upstream changed that we do not match.
//
//	go run ./hack/upstreamlist -repo /work/.mirror/kubernetes-sigs+cluster-autoscaler/repo -commit main
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

const (
	beginMarker = "# BEGIN GENERATED"
	endMarker   = "# END GENERATED"
)

func main() {
	repo := flag.String("repo", "/work/.mirror/kubernetes-sigs+cluster-autoscaler/repo",
		"git directory of a kubernetes-sigs/cluster-autoscaler mirror")
	commit := flag.String("commit", "main", "commit or branch to read")
	out := flag.String("out", "cluster-autoscaler/testdata/upstream.txt", "list to rewrite")
	flag.Parse()
	if err := run(*repo, *commit, *out); err != nil {
		fmt.Fprintln(os.Stderr, "upstreamlist:", err)
		os.Exit(1)
	}
}

func run(repo, commit, out string) error {
	tree, err := newGitTree(repo, commit)
	if err != nil {
		return err
	}
	list, notes, err := Read(tree, "kubernetes-sigs/cluster-autoscaler", tree.commit, tree.date)
	if err != nil {
		return err
	}
	old, err := os.ReadFile(out)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	merged, err := Merge(old, list)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, merged, 0o644); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(os.Stderr, "note:", n)
	}
	fmt.Fprintf(os.Stderr, "wrote %s from %s; now run: go test ./cluster-autoscaler -run TestUpstreamList\n", out, tree.commit)
	return nil
}

// Merge replaces the generated block of old (between the markers) with
// generated, keeping everything else; with no block, the block is appended.
func Merge(old, generated []byte) ([]byte, error) {
	block := append([]byte(beginMarker+" by `go run ./hack/upstreamlist`; edit only the lines after the END line\n"),
		generated...)
	block = append(block, []byte(endMarker+"\n")...)
	begin := bytes.Index(old, []byte(beginMarker))
	end := bytes.LastIndex(old, []byte(endMarker))
	switch {
	case begin < 0 && end < 0:
		return append(old, block...), nil
	case begin < 0 || end < begin:
		return nil, fmt.Errorf("the list has a broken %q ... %q block", beginMarker, endMarker)
	}
	rest := old[end+len(endMarker):]
	if i := bytes.IndexByte(rest, '\n'); i >= 0 {
		rest = rest[i+1:]
	}
	var b bytes.Buffer
	b.Write(old[:begin])
	b.Write(block)
	b.Write(rest)
	return b.Bytes(), nil
}

// gitTree reads files of one commit of a bare repository.
type gitTree struct {
	repo, commit, date string
	names              []string
}

func newGitTree(repo, ref string) (*gitTree, error) {
	out, err := git(repo, "log", "-1", "--format=%H %cs", ref)
	if err != nil {
		return nil, err
	}
	commit, date, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	list, err := git(repo, "ls-tree", "-r", "--name-only", commit)
	if err != nil {
		return nil, err
	}
	return &gitTree{repo: repo, commit: commit, date: date, names: strings.Split(strings.TrimSpace(string(list)), "\n")}, nil
}

func (g *gitTree) ReadFile(name string) ([]byte, error) {
	return git(g.repo, "show", g.commit+":"+name)
}

func (g *gitTree) Files(dir string, recursive bool) ([]string, error) {
	var out []string
	for _, n := range g.names {
		rest, ok := strings.CutPrefix(n, dir+"/")
		if !ok || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if recursive || !strings.Contains(rest, "/") {
			out = append(out, n)
		}
	}
	return out, nil
}

func git(repo string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", append([]string{"-C", repo}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}
