package producer_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// Guarantee: package producer exports only what a source author or a
// pipeline's user needs (the source contract, the stage handles, the
// options, the errors and the status types): the runtime that runs the
// stages stays unexported, reached by the pipeline through an internal
// package. A new exported name must be added here on purpose.
func TestExportsOnlyUserAPI(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var got []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.IsExported() {
					got = append(got, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							got = append(got, s.Name.Name)
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() && (strings.HasPrefix(n.Name, "Err") || d.Tok == token.TYPE) {
								got = append(got, n.Name)
							}
						}
					}
				}
			}
		}
	}
	slices.Sort(got)
	want := []string{
		"Basic", "ErrFeedClosed", "ErrNilContext", "ErrNoRateLimit", "ErrPushFeed", "ErrTooManyRestarts", "ErrUnreachable", "ExitError", "FailureStack",
		"Feed", "FeedStats", "Flow", "Info", "NamedFeedStats", "Options", "RateLimit", "Restart", "RestartError",
		"RestartRule", "RunHealth", "Source", "SourceFunc", "Stage", "StageStatus", "State",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("package producer exports the types, functions and errors %v, want %v", got, want)
	}
}
