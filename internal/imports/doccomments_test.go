package imports_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// undocumented returns the exported package-level names declared in
// files of dir (functions, types, constants, variables, and the methods
// of exported types) that have no doc comment, as "file:line: name". A
// name in a parenthesised group is documented by the group's comment.
func undocumented(t *testing.T, dir string, files []string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		at := func(p token.Pos, what string) {
			pos := fset.Position(p)
			out = append(out, fmt.Sprintf("%s:%d: %s", pos.Filename, pos.Line, what))
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Doc == nil && d.Name.IsExported() && exportedReceiver(d) {
					at(d.Pos(), d.Name.Name)
				}
			case *ast.GenDecl:
				if d.Doc != nil && d.Lparen.IsValid() {
					continue
				}
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() && s.Doc == nil && d.Doc == nil {
							at(s.Pos(), s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && s.Doc == nil && s.Comment == nil && d.Doc == nil {
								at(n.Pos(), n.Name)
							}
						}
					}
				}
			}
		}
	}
	return out
}

// exportedReceiver reports whether d is a function, or a method of an
// exported type: a method of an unexported type is not in the package's
// documentation.
func exportedReceiver(d *ast.FuncDecl) bool {
	if d.Recv == nil {
		return true
	}
	typ := d.Recv.List[0].Type
	if s, ok := typ.(*ast.StarExpr); ok {
		typ = s.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	id, ok := typ.(*ast.Ident)
	return ok && id.IsExported()
}

// Guarantee: every exported name of every package of the module (the
// internal ones included, which other packages read) has a doc comment,
// so that `go doc` says what each one is for.
func TestEveryExportedNameHasADocComment(t *testing.T) {
	pkgs := listPackages(t)
	if len(pkgs) < 20 {
		t.Fatalf("only %d packages listed: the scan is broken", len(pkgs))
	}
	var missing []string
	for _, p := range pkgs {
		if p.name == "main" {
			continue
		}
		missing = append(missing, undocumented(t, p.dir, p.files)...)
	}
	if len(missing) > 0 {
		t.Errorf("%d exported names have no doc comment:\n%s", len(missing), strings.Join(missing, "\n"))
	}
}

// Guarantee: the scan finds what it looks for, so that the test above
// cannot pass by finding nothing.
func TestUndocumentedFindsEachKindOfName(t *testing.T) {
	dir := t.TempDir()
	src := `package p

func F() {}

type T struct{}

func (T) M() {}

type u struct{}

func (u) M() {}

const C = 1

var V = 2

// Grouped are documented by this comment.
const (
	G1 = 1
	G2 = 2
)

// D is documented.
func D() {}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	got := undocumented(t, dir, []string{"p.go"})
	var names []string
	for _, g := range got {
		names = append(names, g[strings.LastIndex(g, " ")+1:])
	}
	if want := "F T M C V"; strings.Join(names, " ") != want {
		t.Errorf("undocumented names %q, want %q", names, want)
	}
}
