package imports_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// snippetContextMark opens the HTML comment that may stand on the lines
// just above a Go code block of the docs: the Go declarations (package
// level) of the names the snippet uses without declaring them, such as a
// pipeline built further up the page or the user's own handler. The
// comment does not show when the Markdown is rendered.
const snippetContextMark = "<!-- snippet context:"

// snippetVocabulary is declared for every fragment of the docs that does
// not declare the name itself: the context and the message type the docs
// use throughout.
var snippetVocabulary = map[string]string{
	"ctx":   "var ctx context.Context",
	"Order": "type Order struct {\n\tID, Customer string\n\tQuantity int\n}",
}

// snippetImports are the package names the docs' fragments use besides
// the module's own packages (found by their package name), by the name
// the docs give them.
var snippetImports = map[string]string{
	"context":    "context",
	"errors":     "errors",
	"fmt":        "fmt",
	"http":       "net/http",
	"json":       "encoding/json",
	"log":        "log",
	"os":         "os",
	"signal":     "os/signal",
	"slog":       "log/slog",
	"synctest":   "testing/synctest",
	"syscall":    "syscall",
	"testing":    "testing",
	"time":       "time",
	"bpulsar":    module + "/sources/pulsar",
	"goleak":     "go.uber.org/goleak",
	"kfake":      "github.com/twmb/franz-go/pkg/kfake",
	"kgo":        "github.com/twmb/franz-go/pkg/kgo",
	"prometheus": "github.com/prometheus/client_golang/prometheus",
	"pulsar":     "github.com/apache/pulsar-client-go/pulsar",
	"sarama":     "github.com/IBM/sarama",
	"sdktrace":   "go.opentelemetry.io/otel/sdk/trace",
}

// snippet is one Go code block of a Markdown file.
type snippet struct {
	file string // relative to the module root
	line int    // of the first line of code
	code string
	// context holds the declarations of the comment above the block, and
	// contextLine the line that comment starts on.
	context     string
	contextLine int
}

// goSnippets returns the Go code blocks of md, each with the context its
// comment declares.
func goSnippets(file string, md []byte) ([]snippet, error) {
	var out []snippet
	lines := strings.Split(string(md), "\n")
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(trimmed, "```") {
			continue
		}
		indent := lines[i][:strings.Index(lines[i], "```")]
		end := i + 1
		for end < len(lines) && strings.TrimSpace(lines[end]) != "```" {
			end++
		}
		if end == len(lines) {
			return nil, fmt.Errorf("%s:%d: code block never closed", file, i+1)
		}
		if trimmed == "```go" {
			s := snippet{file: file, line: i + 2}
			var code strings.Builder
			for _, l := range lines[i+1 : end] {
				code.WriteString(strings.TrimPrefix(l, indent) + "\n")
			}
			s.code = code.String()
			s.context, s.contextLine = snippetContext(lines, i)
			out = append(out, s)
		}
		i = end
	}
	return out, nil
}

// snippetContext returns the declarations of the context comment that
// ends on the line above lines[fence], and the line number (from 1) the
// comment starts on; "" when there is none.
func snippetContext(lines []string, fence int) (string, int) {
	last := fence - 1
	if last < 0 || !strings.HasSuffix(strings.TrimSpace(lines[last]), "-->") {
		return "", 0
	}
	first := last
	for !strings.HasPrefix(strings.TrimSpace(lines[first]), snippetContextMark) {
		first--
		if first < 0 || strings.Contains(lines[first], "-->") {
			return "", 0 // not a context comment
		}
	}
	decls := slices.Clone(lines[first : last+1])
	decls[0] = strings.TrimPrefix(strings.TrimSpace(decls[0]), snippetContextMark)
	decls[len(decls)-1] = strings.TrimSuffix(strings.TrimSpace(decls[len(decls)-1]), "-->")
	return strings.Join(decls, "\n") + "\n", first + 1
}

// usedNames returns the identifiers that src uses as x in x.Sel, the
// candidates for package names.
func usedNames(f *ast.File) map[string]bool {
	names := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok {
				names[id.Name] = true
			}
		}
		return true
	})
	return names
}

// snippetFile is the Go file that a snippet is checked as: the snippet
// itself when it is a complete file (it starts, after any comments, with
// a package clause); else, in package snippet, the vocabulary, the
// context and the snippet, the snippet as package-level declarations when
// it parses as such and else as the body of a function returning an
// error, with imports of the packages it names. Line directives make every
// position of the snippet and its context a position in the Markdown file.
func snippetFile(fset *token.FileSet, s snippet, imports map[string]string) (*ast.File, error) {
	directive := func(line int) string { return fmt.Sprintf("//line %s:%d\n", s.file, line) }
	if _, err := parser.ParseFile(token.NewFileSet(), "", s.code, parser.PackageClauseOnly); err == nil {
		return parser.ParseFile(fset, "snippet.go", directive(s.line)+s.code, parser.SkipObjectResolution)
	}
	parse := func(fset *token.FileSet, src string) (*ast.File, error) {
		return parser.ParseFile(fset, "snippet.go", "package snippet\n"+src, parser.SkipObjectResolution)
	}
	var context string
	if s.context != "" {
		context = directive(s.contextLine) + s.context
	}
	src := context + directive(s.line) + s.code
	f, err := parse(token.NewFileSet(), src)
	if err != nil {
		src = context + "func _() error {\n" + directive(s.line) + s.code + "return nil\n}\n"
		if f, err = parse(token.NewFileSet(), src); err != nil {
			return nil, err
		}
	}
	// The names the context and the snippet declare at package level,
	// which no import or vocabulary may redeclare.
	names := newGoNames()
	names.add("snippet", f)
	declared := names.pkgs["snippet"]
	var vocabulary strings.Builder
	vocabulary.WriteString("//line snippetVocabulary:1\n")
	for _, name := range slices.Sorted(maps.Keys(snippetVocabulary)) {
		if !declared[name] {
			vocabulary.WriteString(snippetVocabulary[name] + "\n")
		}
	}
	src = vocabulary.String() + src
	if f, err = parse(token.NewFileSet(), src); err != nil {
		return nil, err
	}
	var header strings.Builder
	for _, name := range slices.Sorted(maps.Keys(usedNames(f))) {
		if path, ok := imports[name]; ok && !declared[name] {
			fmt.Fprintf(&header, "import %s %q\n", name, path)
		}
	}
	return parse(fset, header.String()+src)
}

// exportData runs go list -export on paths and their dependencies and
// returns the export data file of each package, by import path.
func exportData(t *testing.T, paths []string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}={{.Export}}"}, paths...)...).Output()
	if err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			t.Fatalf("go list -export: %v\n%s", err, exit.Stderr)
		}
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		if path, file, ok := strings.Cut(line, "="); ok && file != "" {
			files[path] = file
		}
	}
	return files
}

// snippetPackageNames adds to imports the module's packages, outside
// internal directories and the examples, by package name, leaving out a
// name two packages share.
func snippetPackageNames(t *testing.T, imports map[string]string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.Name}} {{.ImportPath}}", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	shared := map[string]bool{}
	own := map[string]string{}
	for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
		name, path, _ := strings.Cut(line, " ")
		dirs := strings.Split(path, "/")
		if name == "main" || slices.Contains(dirs, "internal") || slices.Contains(dirs, "examples") {
			continue
		}
		if _, dup := own[name]; dup {
			shared[name] = true
		}
		own[name] = path
	}
	for name, path := range own {
		if _, ok := imports[name]; !ok && !shared[name] {
			imports[name] = path
		}
	}
}

// snippetErrorIgnored reports whether a type-checking error is one the
// docs may have: a variable a snippet declares to show what a call
// returns, or an import the snippet's own names shadow.
func snippetErrorIgnored(err types.Error) bool {
	return err.Soft && (strings.Contains(err.Msg, "declared and not used") || strings.Contains(err.Msg, "imported and not used"))
}

// Guarantee: every Go code block of the docs (README.md, docs/*.md and
// the examples' READMEs) type-checks against the module at this commit,
// so that a user who copies one gets no compile error from a name that
// no longer exists or a call whose arguments changed. A block that starts
// with "package" is checked as a file; any other is a fragment, checked
// as package-level declarations or as the body of a function returning
// an error, with the imports of the packages it names and the
// placeholders of snippetVocabulary; the names of the user's own code it
// uses are declared in a "<!-- snippet context: ... -->" comment on the
// lines just above the block. Unused variables are allowed. The
// performance log is left out: it records past commits.
func TestDocsGoBlocksTypeCheck(t *testing.T) {
	docs, _ := filepath.Glob("../../docs/*.md")
	examples, _ := filepath.Glob("../../examples/*/README.md")
	var snippets []snippet
	for _, file := range slices.Concat([]string{"../../README.md"}, docs, examples) {
		if filepath.Base(file) == "performance-log.md" {
			continue
		}
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		found, err := goSnippets(strings.TrimPrefix(file, "../../"), md)
		if err != nil {
			t.Fatal(err)
		}
		snippets = append(snippets, found...)
	}
	if len(snippets) < 30 {
		t.Fatalf("only %d Go code blocks found; the test would check little", len(snippets))
	}

	imports := maps.Clone(snippetImports)
	snippetPackageNames(t, imports)
	fset := token.NewFileSet()
	var files []*ast.File
	needed := map[string]bool{}
	for _, s := range snippets {
		f, err := snippetFile(fset, s, imports)
		if err != nil {
			t.Errorf("the Go block at %s:%d does not parse: %v", s.file, s.line, err)
			files = append(files, nil)
			continue
		}
		files = append(files, f)
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			needed[path] = true
		}
	}
	exports := exportData(t, slices.Sorted(maps.Keys(needed)))
	conf := types.Config{
		GoVersion: "go1.26",
		Importer: importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			file, ok := exports[path]
			if !ok {
				return nil, fmt.Errorf("no export data for %q", path)
			}
			return os.Open(file)
		}),
	}
	for i, f := range files {
		if f == nil {
			continue
		}
		var errs []string
		conf.Error = func(err error) {
			if te, ok := err.(types.Error); ok && snippetErrorIgnored(te) {
				return
			}
			errs = append(errs, err.Error())
		}
		conf.Check("snippet", fset, []*ast.File{f}, nil)
		for _, e := range errs {
			t.Errorf("%s (the Go block at %s:%d)", e, snippets[i].file, snippets[i].line)
		}
	}
	if t.Failed() {
		t.Log("a fragment is given the imports of the packages it names (the module's, by package name, and snippetImports); " +
			`the names of the user's own code it uses are declared in a comment just above it: "` + snippetContextMark + ` var p *pipeline.Pipeline[[]byte, Order] -->"`)
	}
}
