package imports_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// testName is a name the docs may give a test, benchmark, example or
	// fuzz target by.
	testName = regexp.MustCompile(`\b(?:Test|Benchmark|Example|Fuzz)[A-Z]\w*`)
	// testSelector is the argument of go test's -run, -bench or -fuzz,
	// quoted or not, on the flag's line or the next.
	testSelector = regexp.MustCompile("-(?:run|bench|fuzz)(?:=|\\s+)(?:'[^']*'|\"[^\"]*\"|[^\\s`]+)")
	// testFunc is a function without a receiver of a gofmt-formatted
	// file, which starts its line.
	testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark|Example|Fuzz)\w*)\(`)
	// docFunc is a function a code block of the doc declares.
	docFunc = regexp.MustCompile(`\bfunc ((?:Test|Benchmark|Example|Fuzz)[A-Z]\w*)\(`)
)

// docTestName is a name of a test that a doc gives, at a line of it.
type docTestName struct {
	name   string
	line   int
	prefix bool // the name is cut short with "…" or "...": a prefix of one
}

// docTestNames returns the names md gives tests by: every identifier
// starting with Test, Benchmark, Example or Fuzz and an upper-case letter,
// wherever it stands (prose, code spans, code blocks), with these left out:
//   - the arguments of -run, -bench and -fuzz, which are patterns (A|B, a
//     prefix, TestName/seed=N) that go test matches, not names; the
//     commands that give them are checked by
//     TestDocsGoTestCommandsSelectExistingTests;
//   - the functions a code block of md declares (func TestX(...)), which
//     are the reader's own.
//
// A name followed by "…" or "..." is a prefix of the names it stands for.
func docTestNames(md string) []docTestName {
	// Blank the patterns out, keeping their line breaks so that the lines
	// of the names after them stay right.
	md = testSelector.ReplaceAllStringFunc(md, func(s string) string {
		return strings.Repeat("\n", strings.Count(s, "\n"))
	})
	own := map[string]bool{}
	for _, m := range docFunc.FindAllStringSubmatch(md, -1) {
		own[m[1]] = true
	}
	var out []docTestName
	for i, line := range strings.Split(md, "\n") {
		for _, loc := range testName.FindAllStringIndex(line, -1) {
			name := line[loc[0]:loc[1]]
			if own[name] {
				continue
			}
			rest := line[loc[1]:]
			out = append(out, docTestName{
				name:   name,
				line:   i + 1,
				prefix: strings.HasPrefix(rest, "…") || strings.HasPrefix(rest, "..."),
			})
		}
	}
	return out
}

// repoNames returns, from every Go file of the repository below root
// (the bench module and files behind build tags included; testdata and
// hidden directories not), the functions without a receiver of the
// _test.go files, and the names the other files declare (functions,
// methods, types, fields, constants and variables).
func repoNames(t *testing.T, root string) (tests, declared map[string]bool) {
	t.Helper()
	tests, declared = map[string]bool{}, map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != root && (n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if strings.HasSuffix(path, "_test.go") {
			for _, m := range testFunc.FindAllSubmatch(src, -1) {
				tests[string(m[1])] = true
			}
			return nil
		}
		if !testName.Match(src) {
			return nil // declares none of the names
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.FuncDecl:
				declared[n.Name.Name] = true
			case *ast.TypeSpec:
				declared[n.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range n.Names {
					declared[id.Name] = true
				}
			case *ast.Field:
				for _, id := range n.Names {
					declared[id.Name] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return tests, declared
}

// Guarantee: every test, benchmark, example or fuzz target the docs
// (README.md, docs/*.md and the examples' READMEs, the performance log
// apart: it records past commits under the names they had) name as
// evidence or to be run is a function of a _test.go file of the
// repository (the bench module's included) at this commit, so that a
// reader who looks one up or runs it finds it after a rename. Which names
// are checked is docTestNames' rule; a name the module's non-test code
// declares (Pipeline.TestWith, pipeline.TestOptions) is that API, not a
// test.
func TestDocsNameOnlyExistingTests(t *testing.T) {
	tests, declared := repoNames(t, "../..")
	if len(tests) < 500 {
		t.Fatalf("found %d test functions; the repository has thousands", len(tests))
	}
	names := slices.Sorted(maps.Keys(tests))
	checked := 0
	for _, file := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join("../..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range docTestNames(string(md)) {
			checked++
			switch {
			case n.prefix:
				if !slices.ContainsFunc(names, func(s string) bool { return strings.HasPrefix(s, n.name) }) {
					t.Errorf("%s:%d: no test function starts with %s", file, n.line, n.name)
				}
			case !tests[n.name] && !declared[n.name]:
				t.Errorf("%s:%d: %s is no test function of the repository", file, n.line, n.name)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d names of tests in the docs; the test would check little", checked)
	}
}

func TestDocTestNamesLeavesOutPatternsAndTheDocsOwnFunctions(t *testing.T) {
	md := "`TestA` and BenchmarkB.\n" +
		"`go test -run 'TestC|TestD' -bench=BenchmarkE ./x/`\n" +
		"`go test -run\nTestF -fuzz FuzzG ./x/` and `TestH…`\n" +
		"```go\nfunc TestI(t *testing.T) { ExampleJ() }\n```\n" +
		"Testing, TestingT and Test are no names; TestK is.\n"
	var got []string
	for _, n := range docTestNames(md) {
		s := n.name + ":" + string(rune('0'+n.line))
		if n.prefix {
			s += "…"
		}
		got = append(got, s)
	}
	want := []string{"TestA:1", "BenchmarkB:1", "TestH:4…", "ExampleJ:6", "TestK:8"}
	if !slices.Equal(got, want) {
		t.Errorf("docTestNames = %v, want %v", got, want)
	}
}
