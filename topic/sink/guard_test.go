package sink_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	topicsource "github.com/boulevard-go/boulevard/sources/topic"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
)

// optionalInterfaces are the interfaces a producer.Source may implement
// besides Source itself. TestOptionalInterfacesListed keeps the list
// complete.
var optionalInterfaces = map[string]reflect.Type{
	"Closer":        reflect.TypeFor[producer.Closer](),
	"Ordered":       reflect.TypeFor[producer.Ordered](),
	"Validator":     reflect.TypeFor[producer.Validator](),
	"WindowAdvisor": reflect.TypeFor[producer.WindowAdvisor](),
}

// Every non-generic exported interface of package producer is in
// optionalInterfaces, so a new optional interface cannot be missed by
// TestGuardSourceKeepsOptionalInterfaces.
func TestOptionalInterfacesListed(t *testing.T) {
	files, err := filepath.Glob("../../producer/*.go")
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
	slices.Sort(declared)
	if listed := slices.Sorted(maps.Keys(optionalInterfaces)); !slices.Equal(declared, listed) {
		t.Fatalf("package producer declares the optional interfaces %v; this test lists %v", declared, listed)
	}
}

// guardCase builds two fresh, equal sources: one bare, one wrapped by
// GuardSource.
type guardCase struct {
	name string
	make func(t *testing.T) (bare, wrapped any)
}

func guardCases() []guardCase {
	kafkaCase := func(name string, unordered bool) guardCase {
		return guardCase{name, func(t *testing.T) (any, any) {
			mk := func() *kafka.Source {
				s, err := kafka.New(kafka.Options{Brokers: []string{"127.0.0.1:9092"}, GroupID: "g", Topics: []string{"t"}, Unordered: unordered})
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			return mk(), sink.GuardSource[[]byte](mk())
		}}
	}
	return []guardCase{
		kafkaCase("kafka", false),
		kafkaCase("kafka unordered", true),
		{"pulsar without a client", func(*testing.T) (any, any) {
			mk := func() *pulsar.Source { return pulsar.New(pulsar.Options{Topics: []string{"t"}}) }
			return mk(), sink.GuardSource[[]byte](mk())
		}},
		{"topic", func(t *testing.T) (any, any) {
			h, err := topic.NewTopic[int]("t", topic.Options{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(h.Close)
			mk := func() *topicsource.Source[int] {
				s, err := topicsource.New(topicsource.Options[int]{Topic: h, Mode: topic.Balanced("g")})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = s.Close(context.Background()) })
				return s
			}
			return mk(), sink.GuardSource[int](mk())
		}},
	}
}

// GuardSource keeps every optional interface a built-in source implements,
// and each of its methods answers as the bare source does.
func TestGuardSourceKeepsOptionalInterfaces(t *testing.T) {
	for _, c := range guardCases() {
		t.Run(c.name, func(t *testing.T) {
			bare, wrapped := c.make(t)
			bv, wv := reflect.ValueOf(bare), reflect.ValueOf(wrapped)
			for _, name := range slices.Sorted(maps.Keys(optionalInterfaces)) {
				iface := optionalInterfaces[name]
				if !bv.Type().Implements(iface) {
					continue
				}
				if !wv.Type().Implements(iface) {
					t.Errorf("the wrapper drops producer.%s", name)
					continue
				}
				for i := range iface.NumMethod() {
					m := iface.Method(i)
					got := call(t, wv.MethodByName(m.Name))
					want := call(t, bv.MethodByName(m.Name))
					if got != want {
						t.Errorf("%s: wrapper returns %s, source returns %s", m.Name, got, want)
					}
				}
			}
		})
	}
}

// call calls a method whose parameters are all context.Context and prints
// its results.
func call(t *testing.T, m reflect.Value) string {
	t.Helper()
	args := make([]reflect.Value, m.Type().NumIn())
	for i := range args {
		in := m.Type().In(i)
		if in != reflect.TypeFor[context.Context]() {
			t.Fatalf("do not know how to call a method taking a %s", in)
		}
		args[i] = reflect.ValueOf(context.Background())
	}
	var out []string
	for _, r := range m.Call(args) {
		out = append(out, fmt.Sprintf("%v", r.Interface()))
	}
	return "(" + strings.Join(out, ", ") + ")"
}
