package imports_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goNames is what the module declares, as the docs name it: the exported
// package-level names of every package, by package name (two packages may
// share one), and the exported fields and methods of every type, by type
// name.
type goNames struct {
	pkgs    map[string]map[string]bool
	members map[string]map[string]bool
	// fields lists, by field name, the types of the struct fields so
	// named, through which the docs name options (Processors.MaxDemand).
	fields map[string][]string
	// embeds lists the types whose members include those of an embedded
	// type, which the docs may name through the outer one.
	embeds map[string][]string
}

func newGoNames() *goNames {
	return &goNames{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, embeds: map[string][]string{}, fields: map[string][]string{}}
}

func (g *goNames) member(typ, name string) {
	if g.members[typ] == nil {
		g.members[typ] = map[string]bool{}
	}
	g.members[typ][name] = true
}

// add records the exported names that f declares in package pkg.
func (g *goNames) add(pkg string, f *ast.File) {
	if g.pkgs[pkg] == nil {
		g.pkgs[pkg] = map[string]bool{}
	}
	top := g.pkgs[pkg]
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				top[d.Name.Name] = true
				continue
			}
			if r := recvTypeName(d.Recv.List[0].Type); r != "" {
				g.member(r, d.Name.Name)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				switch s := s.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						top[n.Name] = true
					}
				case *ast.TypeSpec:
					top[s.Name.Name] = true
					g.typeMembers(s.Name.Name, s.Type)
				}
			}
		}
	}
}

func (g *goNames) typeMembers(typ string, t ast.Expr) {
	var fields *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		fields = t.Fields
	case *ast.InterfaceType:
		fields = t.Methods
	default:
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			g.member(typ, n.Name)
			if ft := recvTypeName(f.Type); ft != "" {
				g.fields[n.Name] = append(g.fields[n.Name], ft)
			}
			if _, anonymous := f.Type.(*ast.StructType); anonymous {
				// sarama's Config.Consumer.Offsets: the members of an
				// unnamed struct, by the name of its field.
				g.typeMembers(n.Name, f.Type)
			}
		}
		if len(f.Names) == 0 {
			if e := recvTypeName(f.Type); e != "" {
				g.member(typ, e)
				g.embeds[typ] = append(g.embeds[typ], e)
			}
		}
	}
}

// hasMember reports whether a type named typ (in any package) has a field
// or method name, its own or promoted from an embedded type.
func (g *goNames) hasMember(typ, name string, depth int) bool {
	if g.members[typ][name] {
		return true
	}
	if depth > 4 {
		return false
	}
	for _, e := range g.embeds[typ] {
		if g.hasMember(e, name, depth+1) {
			return true
		}
	}
	return false
}

// recvTypeName is the name of a (possibly pointer, generic or qualified)
// type expression.
func recvTypeName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.SelectorExpr:
			return t.Sel.Name
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

var (
	codeSpan = regexp.MustCompile("`[^`\n]+`")
	// qualified matches pkg.Name and pkg.Name.Member, and Type.Member.
	qualified = regexp.MustCompile(`(?:^|[^\w.])([A-Za-z]\w*)\.([A-Z]\w*)(?:\.([A-Z]\w*))?`)
)

// docReferences returns, for every code span of md, the Go names it quotes
// as pkg.Name, pkg.Type.Member or Type.Member that do not exist in g, each
// as "file:line: reference". A first part that is none of the packages,
// types or struct fields g knows (a variable, a package of another module)
// is not checked, nor are fenced code blocks (their names are local) and
// quoted error messages (their paths are option paths).
func docReferences(g *goNames, file string, md []byte) []string {
	var out []string
	fenced := false
	for i, line := range strings.Split(string(md), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue // code blocks use local names of their own
		}
		for _, span := range codeSpan.FindAllString(line, -1) {
			if strings.Contains(span, " must ") {
				continue // an error message, whose paths are option paths
			}
			for _, m := range qualified.FindAllStringSubmatch(span, -1) {
				first, name, member := m[1], m[2], m[3]
				if bad := g.check(first, name, member); bad != "" {
					out = append(out, fmt.Sprintf("%s:%d: %s in %s", file, i+1, bad, span))
				}
			}
		}
	}
	return out
}

// check returns what of first.name(.member) the module does not declare,
// or "" when it does or when first is not the module's to check. A
// Type.Member whose Type is a field name (Processors.Handle, the field
// Processors of pipeline.Options) is checked against the field's type.
func (g *goNames) check(first, name, member string) string {
	if top, ok := g.pkgs[first]; ok && first[0] >= 'a' && first[0] <= 'z' {
		if !top[name] {
			return fmt.Sprintf("%s.%s is not declared", first, name)
		}
		if member != "" && !g.hasMember(name, member, 0) {
			return fmt.Sprintf("%s.%s has no field or method %s", first, name, member)
		}
		return ""
	}
	if first[0] < 'A' || first[0] > 'Z' {
		return ""
	}
	_, isType := g.members[first]
	fieldTypes := g.fields[first]
	if !isType && len(fieldTypes) == 0 {
		return ""
	}
	if g.hasMember(first, name, 0) {
		return ""
	}
	for _, ft := range fieldTypes {
		if g.hasMember(ft, name, 0) {
			return ""
		}
	}
	return fmt.Sprintf("%s has no field or method %s", first, name)
}

// parsePackage adds the declarations of the named Go files of dir, package
// pkg, to g; of the test files, only the Example functions that the docs
// point to as runnable examples.
func (g *goNames) parsePackage(t *testing.T, pkg, dir string, files, testFiles []string) {
	t.Helper()
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		g.add(pkg, f)
	}
	for _, name := range testFiles {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && strings.HasPrefix(fd.Name.Name, "Example") {
				if g.pkgs[pkg] == nil {
					g.pkgs[pkg] = map[string]bool{}
				}
				g.pkgs[pkg][fd.Name.Name] = true
			}
		}
	}
}

// docDependencies are the packages of other modules whose names the docs
// quote beside the module's own (pulsar is both sources/pulsar and
// pulsar-client-go's package).
var docDependencies = []string{
	"github.com/IBM/sarama",
	"github.com/apache/pulsar-client-go/pulsar",
	"github.com/twmb/franz-go/pkg/kgo",
	"github.com/twmb/franz-go/pkg/kfake",
}

// listGo runs go list with a format whose fields are separated by "|".
func listGo(t *testing.T, args ...string) [][]string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list", "-e", "-f",
		"{{.Name}}|{{.Dir}}|{{join .GoFiles \" \"}}|{{join .TestGoFiles \" \"}} {{join .XTestGoFiles \" \"}}"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Split(line, "|"); len(f) == 4 {
			rows = append(rows, f)
		}
	}
	return rows
}

// Guarantee: every Go name the docs (docs/*.md, README.md and the
// examples' READMEs) quote in a code span as pkg.Name, pkg.Type.Member or
// Type.Member is declared at this commit by the module (or, for sarama,
// pulsar-client-go and franz-go, by the dependency the docs talk about),
// so that a user who copies one from the docs finds it. The performance
// log is left out: it records what past commits measured, under the names
// they had.
func TestDocsQuoteOnlyDeclaredNames(t *testing.T) {
	g := newGoNames()
	rows := listGo(t, append([]string{module + "/..."}, docDependencies...)...)
	if len(rows) < 20 {
		t.Fatalf("only %d packages listed; the test would check little", len(rows))
	}
	for _, r := range rows {
		g.parsePackage(t, r[0], r[1], strings.Fields(r[2]), strings.Fields(r[3]))
	}
	docs, _ := filepath.Glob("../../docs/*.md")
	examples, _ := filepath.Glob("../../examples/*/README.md")
	if len(docs) < 10 || len(examples) < 3 {
		t.Fatalf("only %d files in docs/ and %d example READMEs; the test would check little", len(docs), len(examples))
	}
	files := slices.Concat([]string{"../../README.md"}, docs, examples)
	checked := 0
	for _, file := range files {
		if filepath.Base(file) == "performance-log.md" {
			continue
		}
		md, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, b := range docReferences(g, strings.TrimPrefix(file, "../../"), md) {
			t.Error(b)
		}
	}
	if checked < 12 {
		t.Fatalf("only %d documents checked", checked)
	}
}
