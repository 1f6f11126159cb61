package framework

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestWithoutVolcanoPlugin(t *testing.T) {
	conf := strings.Join([]string{
		`actions: "enqueue, allocate"`,
		"tiers:",
		"- plugins:",
		"  - name: priority",
		"- plugins:",
		"  # why the extender is here",
		"  # and more",
		"  - name: extender",
		"    arguments:",
		"      # a comment",
		"      extender.urlPrefix: http://x/volcano",
		"  - name: overcommit",
		"  - name: binpack",
		"",
	}, "\n")
	tests := []struct {
		name    string
		plugin  string
		want    string
		wantErr bool
	}{
		{name: "an entry with comments and arguments", plugin: "extender", want: strings.Join([]string{
			`actions: "enqueue, allocate"`, "tiers:", "- plugins:", "  - name: priority", "- plugins:",
			"  - name: overcommit", "  - name: binpack", "",
		}, "\n")},
		{name: "the last entry", plugin: "binpack", want: strings.Replace(conf, "  - name: binpack\n", "", 1)},
		{name: "a tier's only entry", plugin: "priority", want: strings.Replace(conf, "  - name: priority\n", "", 1)},
		{name: "no such plugin", plugin: "drf", wantErr: true},
		{name: "a name that only starts the same", plugin: "over", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := WithoutVolcanoPlugin(conf, tt.plugin)
			if (err != nil) != tt.wantErr {
				t.Fatalf("WithoutVolcanoPlugin(%q): error %v, want error %v", tt.plugin, err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("WithoutVolcanoPlugin(%q) (-want +got):\n%s", tt.plugin, diff)
			}
		})
	}
}

// TestShippedVolcanoConfWithoutExtender: the shipped conf loses exactly its extender entry.
func TestShippedVolcanoConfWithoutExtender(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "scheduler-config", "volcano-scheduler.conf"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := WithoutVolcanoPlugin(string(raw), "extender")
	if err != nil {
		t.Fatal(err)
	}
	tiers := got[strings.Index(got, "\ntiers:"):]
	if strings.Contains(tiers, "extender") {
		t.Errorf("extender entry left in the tiers:\n%s", tiers)
	}
	for _, plugin := range []string{"priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion", "nodeorder", "binpack"} {
		if !strings.Contains(got, "  - name: "+plugin+"\n") {
			t.Errorf("plugin %s lost:\n%s", plugin, got)
		}
	}
}

func TestCheckVolcanoBinDir(t *testing.T) {
	dir := t.TempDir()
	if err := checkVolcanoBinDir(dir); err == nil || !strings.Contains(err.Error(), "vc-scheduler, vc-controller-manager, crd") {
		t.Errorf("empty folder: %v, want all three named", err)
	}
	for _, name := range []string{"vc-scheduler", "vc-controller-manager"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "crd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := checkVolcanoBinDir(dir); err != nil {
		t.Errorf("complete folder: %v", err)
	}
}
