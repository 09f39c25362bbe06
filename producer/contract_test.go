package producer_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/producer"
)

// The source contract is one interface, so that a wrapper cannot drop part
// of it: package producer declares no exported non-generic interface (the
// shape of an optional source interface), and Source's methods are Run, Info
// and Close.
func TestSourceContractIsOneInterface(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no producer sources: %v", err)
	}
	fset := token.NewFileSet()
	var declared []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			ts, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			if _, isIface := ts.Type.(*ast.InterfaceType); isIface && ts.Name.IsExported() && ts.TypeParams == nil {
				declared = append(declared, ts.Name.Name)
			}
			return false
		})
	}
	if len(declared) > 0 {
		t.Fatalf("package producer declares the interfaces %v beside Source: a wrapper could drop them", declared)
	}
	iface := reflect.TypeFor[producer.Source[int]]()
	var methods []string
	for i := range iface.NumMethod() {
		methods = append(methods, iface.Method(i).Name)
	}
	if want := []string{"Close", "Info", "Run"}; !slices.Equal(methods, want) {
		t.Fatalf("producer.Source has the methods %v, want %v", methods, want)
	}
}
