package sink_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/producer"
	"github.com/boulevard-go/boulevard/sources/kafka"
	"github.com/boulevard-go/boulevard/sources/pulsar"
	"github.com/boulevard-go/boulevard/topic"
	"github.com/boulevard-go/boulevard/topic/sink"
	"github.com/boulevard-go/boulevard/topic/source"
)

// The source contract is one interface, so that a wrapper cannot drop part
// of it: package producer declares no exported non-generic interface (the
// shape of an optional source interface), and Source's methods are Run, Info
// and Close.
func TestSourceContractIsOneInterface(t *testing.T) {
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
			mk := func() *source.Source[int] {
				s, err := source.New(source.Options[int]{Topic: h, Mode: topic.Balanced("g")})
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

// GuardSource keeps the descriptor of every built-in source: its Info
// answers as the bare source's does.
func TestGuardSourceKeepsInfo(t *testing.T) {
	for _, c := range guardCases() {
		t.Run(c.name, func(t *testing.T) {
			bare, wrapped := c.make(t)
			got := call(t, reflect.ValueOf(wrapped).MethodByName("Info"))
			want := call(t, reflect.ValueOf(bare).MethodByName("Info"))
			if got != want {
				t.Errorf("Info: wrapper returns %s, source returns %s", got, want)
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
