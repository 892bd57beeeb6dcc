package layout

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/meshtrain/meshtrain"

// Limits: past them a package or a file has become a drawer.
const (
	maxRootLines = 4000 // non-test lines of one package
	maxFileLines = 800  // lines of one non-test, non-generated file
)

// ceilings are the packages allowed past maxRootLines for now, each with
// the lines it may not grow past and the reason: a ceiling is a debt
// written down, so that the package can only shrink toward the limit.
var ceilings = map[string]struct {
	lines  int
	reason string
}{
	"data": {4650, "the NumPy reader (npz.go, npyshard.go: about 700 lines, a peer's shard read by offset) shares its tests' helpers " +
		"with the package's other readers; it leaves for data/numpy next, as image folders (data/folder) and tables (data/table) did"},
	"mirrored": {4400, "the elastic driver (elastic.go, elastic_commit.go: about 790 lines) works on the sync loop's own state through " +
		"loopHook; it leaves the root when the loop's hook is a public seam (a generation run with its hook)"},
	"nn": {10215, "its layers, kernels and the two model containers (Sequential, Graph) share unexported interfaces " +
		"(the merge layers of merge.go implement Graph's unexported joiner, as Add does; a layer kind implements the unexported LayerSpec and layer, " +
		"so the image layers, about 1,100 lines, and the text layers and activations, about 1,420, live in the root too) " +
		"(so does Architecture.Buffers, the memory estimate's walk of the compiled layers; nn/footprint holds the rest; " +
		"so do Predict and Architecture.Shapes, which run the shards and compile; nn/kerasio and nn/onnx hold the formats); " +
		"the assembly kernels (about 800 lines) and the optimizers are the next to leave, into packages of their own; " +
		"+1,100 for the image layers of Keras's starting models (depthwise, global pooling, padding, cropping, up-sampling, rescaling, normalization), " +
		"each a kind of the registry, which is unexported; " +
		"+400 for what makes ResNet-20's graph fast (batch normalization's kernels, phased stride-2 grids, the full-correlation input gradient); " +
		"+250 for synchronized batch normalization (syncbn.go: its passes read the layer's statistics and the shards' runs; nn/statsync holds the meeting); " +
		"+50 for the glue of Winograd's convolution (conv_wino.go; its passes and kernels are nn/internal/wino)"},
}

// class is a package's place in the layout.
type class string

const (
	leaf      class = "leaf"      // collective, sparse, data, nn and their parts, internal/: know nothing of training strategies
	engine    class = "engine"    // mirrored's root: Run, the loops, the builders
	step      class = "step"      // mirrored/replica (a step's arithmetic: Group, Combiner, replicas) and mirrored/outcome (what a run hands out): below the engine, above the parts they name
	part      class = "part"      // the engine's own parts (gossip, checkpoint, timeline, membership): no mirrored package
	strategy  class = "strategy"  // packages built around the engine: observers, the report, strategies
	running   class = "running"   // mirrored/launch: starts and watches peers
	measuring class = "measuring" // mirrored/measure: benchmarks, sweeps, verdicts
	program   class = "program"   // cmd/, tests/ and examples: may import anything
)

// classes maps a package (relative to the module; a trailing "/" takes
// the folder and all below it) to its class. The first match wins.
var classes = []struct {
	prefix string
	class  class
}{
	{"cmd/", program},
	{"tests/", program},
	{"mirrored/example/", program},
	{"internal/", leaf},
	{"collective/", leaf},
	{"sparse/", leaf},
	{"data/", leaf},
	{"nn/", leaf},
	{"mirrored/gossip/", part},
	{"mirrored/checkpoint/", part},
	{"mirrored/timeline/", part},
	{"mirrored/membership/", part},
	{"mirrored/settings/", part},
	{"mirrored/faults/", part},
	{"mirrored/callbacks/", part},
	{"mirrored/replica/", step},
	{"mirrored/outcome/", step},
	{"mirrored/internal/", part},
	{"mirrored/launch/", running},
	{"mirrored/measure/", measuring},
	{"mirrored", engine},
	{"mirrored/", strategy},
}

// allowed is the table of import edges: a class may import the classes
// listed (and anything outside the module).
var allowed = map[class][]class{
	leaf:      {leaf},
	part:      {leaf},
	step:      {leaf, part},
	engine:    {leaf, part, step},
	strategy:  {leaf, part, step, engine, strategy},
	running:   {leaf, part, step, engine, strategy, running},
	measuring: {leaf, part, step, engine, strategy, running, measuring},
	program:   {leaf, part, step, engine, strategy, running, measuring, program},
}

func classOf(pkg string) (class, bool) {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	for _, c := range classes {
		if rel == c.prefix || rel == strings.TrimSuffix(c.prefix, "/") ||
			(strings.HasSuffix(c.prefix, "/") && strings.HasPrefix(rel, c.prefix)) {
			return c.class, true
		}
	}
	return "", false
}

// violations returns the edges of imports (package → its direct imports)
// that the table forbids, one line each naming the rule.
func violations(imports map[string][]string) []string {
	var out []string
	for pkg, deps := range imports {
		from, ok := classOf(pkg)
		if !ok {
			out = append(out, fmt.Sprintf("%s: no class in the layout table: add it to classes", pkg))
			continue
		}
		for _, dep := range deps {
			if dep != module && !strings.HasPrefix(dep, module+"/") {
				continue
			}
			to, ok := classOf(dep)
			if !ok {
				out = append(out, fmt.Sprintf("%s: no class in the layout table: add it to classes", dep))
				continue
			}
			if !slices.Contains(allowed[from], to) {
				out = append(out, fmt.Sprintf("%s (%s) imports %s (%s): a %s package may import only %v", pkg, from, dep, to, from, allowed[from]))
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestViolations(t *testing.T) {
	m := func(s string) string { return module + "/" + s }
	for _, tc := range []struct {
		name    string
		imports map[string][]string
		want    int
	}{
		{"leaf to leaf", map[string][]string{m("data"): {m("sparse"), "fmt"}}, 0},
		{"leaf to the engine", map[string][]string{m("nn"): {m("mirrored")}}, 1},
		{"part to the engine", map[string][]string{m("mirrored/gossip"): {m("mirrored")}}, 1},
		{"engine to a strategy package", map[string][]string{m("mirrored"): {m("mirrored/observe")}}, 1},
		{"engine to the step", map[string][]string{m("mirrored"): {m("mirrored/replica")}}, 0},
		{"step to a part", map[string][]string{m("mirrored/replica"): {m("mirrored/checkpoint")}}, 0},
		{"step to the engine", map[string][]string{m("mirrored/replica"): {m("mirrored")}}, 1},
		{"part to the step", map[string][]string{m("mirrored/gossip"): {m("mirrored/replica")}}, 1},
		{"running wing to the measuring wing", map[string][]string{m("mirrored/launch"): {m("mirrored/measure/verdict")}}, 1},
		{"measuring wing to the running wing", map[string][]string{m("mirrored/measure/sweep"): {m("mirrored/launch")}}, 0},
		{"cmd to anything", map[string][]string{m("cmd/meshtrain"): {m("mirrored/measure/sweep"), m("mirrored")}}, 0},
		{"an unknown top-level package", map[string][]string{m("junk"): {"fmt"}}, 1},
	} {
		if got := violations(tc.imports); len(got) != tc.want {
			t.Errorf("%s: %d violations %q, want %d", tc.name, len(got), got, tc.want)
		}
	}
}

// root is the module's folder (this package sits two below it).
func root(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err != nil {
		t.Fatalf("the module's root: %v", err)
	}
	return dir
}

type pkgInfo struct {
	path    string
	dir     string
	files   []string
	imports []string
}

// list runs go list over the module: every package with its folder, its
// non-test Go files and its direct imports.
func list(t *testing.T) []pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{.Dir}}\t{{join .GoFiles \" \"}} {{join .CgoFiles \" \"}}\t{{join .Imports \" \"}}", "./...")
	cmd.Dir = root(t)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.Bytes())
	}
	var pkgs []pkgInfo
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimRight(line, "\n"), "\t")
		if len(f) != 4 {
			t.Fatalf("go list line %q: want 4 tab-separated fields", line)
		}
		pkgs = append(pkgs, pkgInfo{path: f[0], dir: f[1], files: strings.Fields(f[2]), imports: strings.Fields(f[3])})
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	imports := map[string][]string{}
	for _, p := range list(t) {
		imports[p.path] = p.imports
	}
	for _, v := range violations(imports) {
		t.Error(v)
	}
}

func TestSizes(t *testing.T) {
	for _, p := range list(t) {
		total := 0
		for _, name := range p.files {
			n, generated, err := countLines(filepath.Join(p.dir, name))
			if err != nil {
				t.Fatal(err)
			}
			total += n
			if !generated && n > maxFileLines {
				t.Errorf("%s: %d lines, over %d: split it by concern", filepath.Join(p.dir, name), n, maxFileLines)
			}
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.path, module), "/")
		limit := maxRootLines
		if c, ok := ceilings[rel]; ok {
			limit = c.lines
			if total <= maxRootLines {
				t.Errorf("%s: %d non-test lines, within %d: remove its ceiling (%s)", p.path, total, maxRootLines, c.reason)
			}
		}
		if total > limit {
			t.Errorf("%s: %d non-test lines, over %d: give the next concern a package of its own", p.path, total, limit)
		}
	}
}

// countLines counts a file's lines and says whether it is generated (the
// standard "Code generated ... DO NOT EDIT." line).
func countLines(path string) (n int, generated bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		n++
		if l := sc.Text(); strings.HasPrefix(l, "// Code generated ") && strings.HasSuffix(l, " DO NOT EDIT.") {
			generated = true
		}
	}
	if err := sc.Err(); err != nil {
		return 0, false, fmt.Errorf("reading %s: %w", path, err)
	}
	return n, generated, nil
}
