package imports_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// codeBlock is a fenced block of a Markdown file; its lines are
	// commands when it is a shell block.
	codeBlock = regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	// commandSpan is an inline code span, which may run over a line break.
	commandSpan = regexp.MustCompile("`([^`]+)`")
	// shellWord is a word of a command: a single-quoted string or a run
	// of characters without spaces.
	shellWord = regexp.MustCompile(`'[^']*'|\S+`)
)

// docCommands returns the commands of md that start with prefix: the lines
// of its code blocks and its code spans (with their line breaks turned
// into spaces), each split into words, quotes removed.
func docCommands(md, prefix string) [][]string {
	var lines []string
	for _, b := range codeBlock.FindAllStringSubmatch(md, -1) {
		lines = append(lines, strings.Split(b[1], "\n")...)
	}
	for _, s := range commandSpan.FindAllStringSubmatch(codeBlock.ReplaceAllString(md, ""), -1) {
		lines = append(lines, s[1])
	}
	var cmds [][]string
	for _, l := range lines {
		l = strings.Join(strings.Fields(l), " ")
		i := strings.Index(l, prefix)
		if i < 0 {
			continue
		}
		l, _, _ = strings.Cut(l[i:], " #")
		var words []string
		for _, w := range shellWord.FindAllString(l, -1) {
			words = append(words, strings.Trim(w, "'"))
		}
		cmds = append(cmds, words)
	}
	return cmds
}

// testFuncs returns the names of the top-level functions of the _test.go
// files of the package in dir.
func testFuncs(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*_test.go"))
	var names []string
	fset := token.NewFileSet()
	for _, file := range files {
		f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil {
				names = append(names, fn.Name.Name)
			}
		}
	}
	return names
}

// docFiles returns the docs a user reads (README.md, docs/*.md and the
// examples' READMEs), by their path from the repository root, the
// performance log apart: it records past commits.
func docFiles(t *testing.T) []string {
	t.Helper()
	docs, _ := filepath.Glob("../../docs/*.md")
	examples, _ := filepath.Glob("../../examples/*/README.md")
	var out []string
	for _, f := range slices.Concat([]string{"../../README.md"}, docs, examples) {
		if filepath.Base(f) != "performance-log.md" {
			out = append(out, strings.TrimPrefix(f, "../../"))
		}
	}
	return out
}

// Guarantee: every `go test` command of the docs that selects tests,
// benchmarks or fuzz targets (-run, -bench, -fuzz) in packages of the
// module selects at least one that exists in those packages, so that a
// user who runs it to see what the doc describes gets that test rather
// than "no tests to run" after a rename. "-run '^$'" and "-run XXX",
// which select no test on purpose, are left alone.
func TestDocsGoTestCommandsSelectExistingTests(t *testing.T) {
	prefixes := map[string]string{"-run": "Test", "-bench": "Benchmark", "-fuzz": "Fuzz"}
	checked := 0
	for _, file := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join("../..", file))
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range docCommands(string(md), "go test ") {
			var pkgs []string
			selectors := map[string]string{}
			for i, w := range cmd {
				if strings.HasPrefix(w, "./") {
					pkgs = append(pkgs, w)
				}
				if _, ok := prefixes[w]; ok && i+1 < len(cmd) {
					selectors[w] = cmd[i+1]
				}
			}
			if len(pkgs) == 0 || len(selectors) == 0 {
				continue // a command for the user's own package, or one running every test
			}
			var funcs []string
			for _, p := range pkgs {
				if strings.HasSuffix(p, "/...") {
					t.Errorf("%s: %q: a pattern of packages cannot be checked", file, strings.Join(cmd, " "))
					continue
				}
				dir := filepath.Join("../..", p)
				if _, err := os.Stat(dir); err != nil {
					t.Errorf("%s: %q names %s, which is not a package of the module", file, strings.Join(cmd, " "), p)
					continue
				}
				funcs = append(funcs, testFuncs(t, dir)...)
			}
			for _, flag := range slices.Sorted(maps.Keys(selectors)) {
				pattern := selectors[flag]
				if flag == "-run" && (pattern == "^$" || pattern == "XXX") {
					continue
				}
				// go test matches the first slash-separated element of the
				// pattern against the top-level names.
				top, _, _ := strings.Cut(pattern, "/")
				re, err := regexp.Compile(top)
				if err != nil {
					t.Errorf("%s: %q: %s %q is not a regular expression: %v", file, strings.Join(cmd, " "), flag, pattern, err)
					continue
				}
				checked++
				if !slices.ContainsFunc(funcs, func(name string) bool {
					return strings.HasPrefix(name, prefixes[flag]) && re.MatchString(name)
				}) {
					t.Errorf("%s: %q: %s %q selects no %s function of %s", file, strings.Join(cmd, " "), flag, pattern, prefixes[flag], strings.Join(pkgs, " "))
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d selections of go test commands; the test would check little", checked)
	}
}

// flagDecl is the declaration of a command-line flag: the flag package's
// functions, on the command line or on a FlagSet named fs.
var flagDecl = regexp.MustCompile(`\b(?:flag|fs)\.\w+\((?:&[\w.]+, )?"([\w-]+)"`)

// programFlags returns the flags the program in dir declares in its
// non-test files, those of examples/internal/monitor included when it
// imports that package.
func programFlags(t *testing.T, dir string) map[string]bool {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	flags := map[string]bool{}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range flagDecl.FindAllStringSubmatch(string(src), -1) {
			flags[m[1]] = true
		}
		if strings.Contains(string(src), `"`+module+`/examples/internal/monitor"`) {
			maps.Copy(flags, programFlags(t, "../../examples/internal/monitor"))
		}
	}
	return flags
}

// Guarantee: every `go run ./examples/<name>` command of the docs and of
// the compose file's header gives only flags that example declares, so
// that a user who runs one as written does not get "flag provided but not
// defined" after a flag was renamed.
func TestDocsRunExamplesWithFlagsTheyDeclare(t *testing.T) {
	sources := map[string]string{}
	for _, file := range docFiles(t) {
		md, err := os.ReadFile(filepath.Join("../..", file))
		if err != nil {
			t.Fatal(err)
		}
		sources[file] = string(md)
	}
	compose, err := os.ReadFile("../../examples/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	// The header's commands are comment lines; as a code block they are
	// read the same way.
	sources["examples/docker-compose.yml"] = "```\n" + string(compose) + "```\n"
	checked := 0
	for _, file := range slices.Sorted(maps.Keys(sources)) {
		for _, cmd := range docCommands(sources[file], "go run ./examples/") {
			dir := filepath.Join("../..", cmd[2])
			if _, err := os.Stat(dir); err != nil {
				t.Errorf("%s: %q runs %s, which is not in the repository", file, strings.Join(cmd, " "), cmd[2])
				continue
			}
			flags := programFlags(t, dir)
			for _, w := range cmd[3:] {
				if !strings.HasPrefix(w, "-") {
					continue // a flag's value
				}
				name, _, _ := strings.Cut(strings.TrimLeft(w, "-"), "=")
				checked++
				if !flags[name] {
					t.Errorf("%s: %q gives -%s, which %s does not declare", file, strings.Join(cmd, " "), name, cmd[2])
				}
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d flags of go run commands; the test would check little", checked)
	}
}
