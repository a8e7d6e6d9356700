package main

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestListIsUpstreamsNewest reads upstream's newest main from the git
// mirror named by UPSTREAM_CA_REPO (a kubernetes-sigs/cluster-autoscaler git
// directory) and fails, naming both commits, when the list was read from
// an older upstream that differs. Without the variable it is skipped: CI
// has no mirror, and TestUpstreamList checks the binary against the list.
//
//	UPSTREAM_CA_REPO=/work/.mirror/kubernetes-sigs+cluster-autoscaler/repo go test ./hack/upstreamlist -run TestListIsUpstreamsNewest
func TestListIsUpstreamsNewest(t *testing.T) {
	repo := os.Getenv("UPSTREAM_CA_REPO")
	if repo == "" {
		t.Skip("UPSTREAM_CA_REPO (a kubernetes-sigs/cluster-autoscaler git directory) is not set")
	}
	tree, err := newGitTree(repo, "main")
	if err != nil {
		t.Fatal(err)
	}
	fresh, _, err := Read(tree, "kubernetes-sigs/cluster-autoscaler", tree.commit, tree.date)
	if err != nil {
		t.Fatal(err)
	}
	list, err := os.ReadFile("../../cluster-autoscaler/testdata/upstream.txt")
	if err != nil {
		t.Fatal(err)
	}
	begin, end := bytes.Index(list, []byte(beginMarker)), bytes.LastIndex(list, []byte(endMarker))
	if begin < 0 || end < begin {
		t.Fatal("the list has no generated block")
	}
	block := list[begin:end]
	block = block[bytes.IndexByte(block, '\n')+1:]
	listed, _, _ := strings.Cut(string(block), "\n") // the upstream line
	body := func(s string) string { _, rest, _ := strings.Cut(s, "\n"); return rest }
	if diff := cmp.Diff(body(string(block)), body(string(fresh))); diff != "" {
		t.Errorf("upstream's main is now %s (%s); the list was read from %q and differs (-list +upstream):\n%s\n"+
			"Read upstream's changes (git log <listed commit>..%s -- pkg/config/flags pkg/metrics), run "+
			"`go run ./hack/upstreamlist -repo %s`, then go test ./cluster-autoscaler -run TestUpstreamList.",
			tree.commit, tree.date, listed, diff, tree.commit, repo)
	}
}
