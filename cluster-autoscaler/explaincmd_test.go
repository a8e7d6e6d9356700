package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSnapshotArg(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		wantPath string
		wantRest []string
		wantErr  bool
	}{
		{args: []string{"pod", "a/b"}, wantRest: []string{"pod", "a/b"}},
		{args: []string{"--snapshot", "d.json", "pod", "a/b", "-o", "json"}, wantPath: "d.json", wantRest: []string{"pod", "a/b", "-o", "json"}},
		{args: []string{"node", "n", "--snapshot=d.json"}, wantPath: "d.json", wantRest: []string{"node", "n"}},
		{args: []string{"pod", "a/b", "--snapshot"}, wantErr: true},
		{args: []string{"--snapshot=", "pod", "a/b"}, wantErr: true},
	} {
		path, rest, err := snapshotArg(tc.args)
		if (err != nil) != tc.wantErr {
			t.Errorf("snapshotArg(%q) error %v, want error %v", tc.args, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if path != tc.wantPath || cmp.Diff(tc.wantRest, rest) != "" {
			t.Errorf("snapshotArg(%q) = %q, %q; want %q, %q", tc.args, path, rest, tc.wantPath, tc.wantRest)
		}
	}
}
