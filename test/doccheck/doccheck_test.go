package doccheck

import (
	"encoding/json"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"sigs.k8s.io/yaml"

	"github.com/cps-extender/cps-extender/extender/config"
)

// root is the repository's top directory: the nearest parent holding go.mod.
func root(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// tracked lists the repository's Markdown files that git tracks, slash-separated, relative
// to the top.
func tracked(t *testing.T, top string) []string {
	t.Helper()
	cmd := exec.Command("git", "ls-files", "-z", "--", "*.md")
	cmd.Dir = top
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(top, f)); err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatal("git tracks no Markdown file")
	}
	return files
}

// pages parses Markdown files once each.
type pages struct {
	top    string
	parsed map[string]*Page
}

func (p *pages) get(file string) (*Page, error) {
	if pg, ok := p.parsed[file]; ok {
		return pg, nil
	}
	src, err := os.ReadFile(filepath.Join(p.top, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	pg := Parse(src)
	p.parsed[file] = &pg
	return &pg, nil
}

// TestLinksResolve: every relative link in a tracked Markdown file names a file or
// directory that exists, and a link with an #anchor into a Markdown file names one of its
// headings' GitHub anchors.
func TestLinksResolve(t *testing.T) {
	top := root(t)
	ps := &pages{top: top, parsed: map[string]*Page{}}
	checked := 0
	for _, file := range tracked(t, top) {
		pg, err := ps.get(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, l := range pg.Links {
			p, anchor, ok := Relative(l.Dest)
			if !ok {
				continue
			}
			checked++
			target := file
			switch {
			case strings.HasPrefix(p, "/"):
				target = path.Clean(strings.TrimPrefix(p, "/"))
			case p != "":
				target = path.Join(path.Dir(file), p)
			}
			if target == ".." || strings.HasPrefix(target, "../") {
				t.Errorf("%s:%d: link %q leaves the repository", file, l.Line, l.Dest)
				continue
			}
			info, err := os.Stat(filepath.Join(top, filepath.FromSlash(target)))
			if err != nil {
				t.Errorf("%s:%d: link %q: no file %s", file, l.Line, l.Dest, target)
				continue
			}
			if anchor == "" || info.IsDir() || !strings.EqualFold(path.Ext(target), ".md") {
				continue
			}
			tp, err := ps.get(target)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", file, l.Line, l.Dest, err)
				continue
			}
			if !tp.Anchors[anchor] {
				t.Errorf("%s:%d: link %q: %s has no heading with the anchor #%s", file, l.Line, l.Dest, target, anchor)
			}
		}
	}
	if checked == 0 {
		t.Error("no relative link found in any Markdown file: the parse is broken")
	}
}

// TestNoLongLines: no line over MaxLine characters in docs/*.md and in every README.md.
// The generated evaluation summaries under docs/eval/ are not reference pages.
func TestNoLongLines(t *testing.T) {
	top := root(t)
	n := 0
	for _, file := range tracked(t, top) {
		if path.Dir(file) != "docs" && path.Base(file) != "README.md" {
			continue
		}
		n++
		src, err := os.ReadFile(filepath.Join(top, filepath.FromSlash(file)))
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		for _, l := range LongLines(src, MaxLine) {
			t.Errorf("%s:%s (over %d)", file, strings.TrimPrefix(l, "line "), MaxLine)
		}
	}
	if n == 0 {
		t.Error("no page in docs/ and no README.md found")
	}
}

// TestReadingGuideNamesEveryPackage: docs/reading-guide.md names every Go package under
// extender/ by its path (e.g. extender/view), as a whole name, not as a prefix of another.
func TestReadingGuideNamesEveryPackage(t *testing.T) {
	top := root(t)
	guide, err := os.ReadFile(filepath.Join(top, "docs", "reading-guide.md"))
	if err != nil {
		t.Fatal(err)
	}
	pkgs := goPackages(t, top, "extender")
	if len(pkgs) == 0 {
		t.Fatal("no Go package under extender/")
	}
	for _, pkg := range pkgs {
		if !names(guide, pkg) {
			t.Errorf("docs/reading-guide.md: package %s is not named", pkg)
		}
	}
}

// goPackages lists the directories under dir (slash paths from top) that hold .go files,
// skipping what the go command skips: testdata and names starting with . or _.
func goPackages(t *testing.T, top, dir string) []string {
	t.Helper()
	var pkgs []string
	err := filepath.WalkDir(filepath.Join(top, dir), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != filepath.Join(top, dir) && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(top, filepath.Dir(p))
			if err != nil {
				return err
			}
			if pkg := filepath.ToSlash(rel); !slices.Contains(pkgs, pkg) {
				pkgs = append(pkgs, pkg)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pkgs
}

// names reports whether text names pkg as a whole path: not followed by more of a name
// (extender/gate does not name extender/ga), though a file path under it counts.
func names(text []byte, pkg string) bool {
	re := regexp.MustCompile(`(^|[^\w/.-])` + regexp.QuoteMeta(pkg) + `($|/|[^\w./-]|\.($|\W))`)
	return re.Match(text)
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Reload while running", "reload-while-running"},
		{"What the extender controls on the Volcano path, and what it does not",
			"what-the-extender-controls-on-the-volcano-path-and-what-it-does-not"},
		{"1. Build and load the image", "1-build-and-load-the-image"},
		{"Urgent jobs: urgency a class, granted by PriorityClass (issue 38)",
			"urgent-jobs-urgency-a-class-granted-by-priorityclass-issue-38"},
		{"model.preemption and its_keys", "modelpreemption-and-its_keys"},
		{"A  B", "a--b"},
		{"Über die Wartezeit", "über-die-wartezeit"},
		{"2026-12-03: a run", "2026-12-03-a-run"},
	} {
		if got := Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestRelative(t *testing.T) {
	for _, tc := range []struct {
		dest, path, anchor string
		ok                 bool
	}{
		{"docs/liveness.md#the-turn-gate", "docs/liveness.md", "the-turn-gate", true},
		{"../priority/README.md", "../priority/README.md", "", true},
		{"#deploy", "", "deploy", true},
		{"/docs/deploy.md", "/docs/deploy.md", "", true},
		{"a%20b.md", "a b.md", "", true},
		{"https://kubernetes.io/docs/", "", "", false},
		{"mailto:someone@example.com", "", "", false},
		{"//example.com/x", "", "", false},
	} {
		p, a, ok := Relative(tc.dest)
		if p != tc.path || a != tc.anchor || ok != tc.ok {
			t.Errorf("Relative(%q) = %q, %q, %v; want %q, %q, %v", tc.dest, p, a, ok, tc.path, tc.anchor, tc.ok)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     string
		links   []Link
		anchors []string
	}{
		{
			name:    "links, images, reference links, each with its line",
			src:     "# Title\n\nsee [a](a.md) and\n![pic](img/p.png)\n\n[ref][r]\n\n[r]: docs/r.md#x\n",
			links:   []Link{{3, "a.md"}, {4, "img/p.png"}, {6, "docs/r.md#x"}},
			anchors: []string{"title"},
		},
		{
			name:    "no links in code spans or code blocks",
			src:     "# `code` heading\n\n`[a](a.md)`\n\n```\n[b](b.md)\n# not a heading\n```\n\n    [c](c.md)\n",
			anchors: []string{"code-heading"},
		},
		{
			name:    "duplicate headings are numbered, setext headings count",
			src:     "## Notes\n\n## Notes\n\nNotes\n-----\n\n## *The* [link](x.md) heading\n",
			links:   []Link{{8, "x.md"}},
			anchors: []string{"notes", "notes-1", "notes-2", "the-link-heading"},
		},
		{
			name:  "a link in a table cell; a bare URL (an autolink) is not collected",
			src:   "| a | b |\n|---|---|\n| [x](x.md#y) | https://example.com |\n",
			links: []Link{{3, "x.md#y"}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pg := Parse([]byte(tc.src))
			if !slices.Equal(pg.Links, tc.links) {
				t.Errorf("links = %v, want %v", pg.Links, tc.links)
			}
			var anchors []string
			for a := range pg.Anchors {
				anchors = append(anchors, a)
			}
			slices.Sort(anchors)
			want := slices.Clone(tc.anchors)
			slices.Sort(want)
			if !slices.Equal(anchors, want) {
				t.Errorf("anchors = %v, want %v", anchors, want)
			}
		})
	}
}

func TestLongLines(t *testing.T) {
	long := strings.Repeat("x", 201)
	for _, tc := range []struct {
		name string
		src  string
		want []string
	}{
		{"none", "short\nlines\n", nil},
		{"exactly the limit passes", strings.Repeat("x", 200) + "\n", nil},
		{"one over, its line number", "a\n" + long + "\nb", []string{"line 2: 201 characters"}},
		{"characters, not bytes", strings.Repeat("é", 150) + "\n", nil},
		{"a CR is no character", strings.Repeat("x", 200) + "\r\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := LongLines([]byte(tc.src), 200); !slices.Equal(got, tc.want) {
				t.Errorf("LongLines = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNames(t *testing.T) {
	guide := []byte("| `extender/gate` | the gate |\nsee extender/view/decide.go and extender/internal/fixture.\nextender/turns, extender/leader.go\n")
	for _, tc := range []struct {
		pkg  string
		want bool
	}{
		{"extender/gate", true},
		{"extender/view", true},
		{"extender/internal/fixture", true},
		{"extender/internal", true},
		{"extender/ga", false},
		{"extender/gang", false},
		{"extender/view/decide", false},
		{"extender/turns", true},
		{"extender/leader", false},
	} {
		if got := names(guide, tc.pkg); got != tc.want {
			t.Errorf("names(%q) = %v, want %v", tc.pkg, got, tc.want)
		}
	}
}

// TestConfigurationPageIsTheDefaults: the YAML block of docs/configuration.md, which says it
// lists every key with its default, decodes strictly (no unknown key) to exactly
// config.DefaultConfig (an empty list and an absent one are the same).
func TestConfigurationPageIsTheDefaults(t *testing.T) {
	top := root(t)
	page, err := os.ReadFile(filepath.Join(top, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	block, ok := firstYAMLBlock(string(page))
	if !ok {
		t.Fatal("docs/configuration.md: no ```yaml block")
	}
	file := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	got, errs := config.LoadConfig(file)
	for _, err := range errs {
		t.Errorf("docs/configuration.md: the yaml block does not decode: %v", err)
	}
	if diff := cmp.Diff(config.DefaultConfig(), got, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("docs/configuration.md: the yaml block differs from config.DefaultConfig (-code +page):\n%s", diff)
	}
	// Every key: the decode above starts from the defaults, so a key left off the page would
	// pass it. The keys are compared as the code writes them out.
	code, err := json.Marshal(config.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	var want, have map[string]any
	if err := json.Unmarshal(code, &want); err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal([]byte(block), &have); err != nil {
		t.Fatal(err)
	}
	for _, key := range missingKeys(want, have, "") {
		t.Errorf("docs/configuration.md: the yaml block has no key %s", key)
	}
}

// missingKeys lists the key paths of want (a.b.c) that have does not hold, in order.
func missingKeys(want, have map[string]any, prefix string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		h, ok := have[k]
		if !ok {
			out = append(out, prefix+k)
			continue
		}
		wm, wIsMap := want[k].(map[string]any)
		hm, hIsMap := h.(map[string]any)
		if wIsMap && hIsMap {
			out = append(out, missingKeys(wm, hm, prefix+k+".")...)
		}
	}
	return out
}

// firstYAMLBlock is the body of the first ```yaml fence of a page.
func firstYAMLBlock(page string) (string, bool) {
	_, rest, ok := strings.Cut(page, "```yaml\n")
	if !ok {
		return "", false
	}
	body, _, ok := strings.Cut(rest, "\n```")
	return body + "\n", ok
}
