package validate_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/boulevard-go/boulevard/validate"
)

// Guarantee: a name of exactly NameMaxLen bytes is valid; one byte more is
// not.
func TestNameOfMaxLenIsValid(t *testing.T) {
	limit := strings.Repeat("a", validate.NameMaxLen)
	if !validate.ValidName(limit) {
		t.Errorf("a name of NameMaxLen (%d) bytes is refused", validate.NameMaxLen)
	}
	if err := validate.Struct("opts", named{Name: limit}); err != nil {
		t.Errorf("Struct refuses a name of NameMaxLen bytes: %v", err)
	}
	if validate.ValidName(limit + "a") {
		t.Errorf("a name of NameMaxLen+1 bytes is accepted")
	}
}

var errOwnCheck = errors.New("own check")

// Guarantee: Join keeps an error that is not a FieldError findable with
// errors.Is, beside ErrInvalid, as a FieldError of rule "invalid" holding
// it, wherever it stands in the list.
func TestJoinKeepsOtherErrors(t *testing.T) {
	err := validate.Join(validate.Field("opts.size", "gte", "must be ≥ 1"), fmt.Errorf("source: %w", errOwnCheck))
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("Join = %v, want two FieldErrors", err)
	}
	if !errors.Is(err, errOwnCheck) || !errors.Is(err, validate.ErrInvalid) {
		t.Errorf("errors.Is(Join(err), err) = %v, errors.Is(Join(err), ErrInvalid) = %v, want both true",
			errors.Is(err, errOwnCheck), errors.Is(err, validate.ErrInvalid))
	}
	if e := errs[1]; e.Rule != "invalid" || e.Message != "source: own check" || !errors.Is(e.Err, errOwnCheck) {
		t.Errorf("FieldError = %+v, want rule invalid, the error's message and the error as Err", e)
	}
}

// Guarantee: Has with an empty rule matches a field whatever its rule, and
// with a rule only that rule.
func TestHasWithoutRuleMatchesAnyRule(t *testing.T) {
	errs := validate.Errors{validate.Field("opts.size", "gte", "must be ≥ 1")}
	if !errs.Has("opts.size", "") {
		t.Error(`Has("opts.size", "") = false, want true`)
	}
	if errs.Has("opts.size", "lte") || errs.Has("opts.other", "") {
		t.Error("Has matches another rule or another field")
	}
}

// Guarantee: a value that is not a struct is an error that wraps ErrInvalid.
func TestStructOfNonStructIsInvalid(t *testing.T) {
	for _, v := range []any{nil, 42} {
		if err := validate.Struct("opts", v); !errors.Is(err, validate.ErrInvalid) {
			t.Errorf("Struct(%v) = %v, want an error wrapping ErrInvalid", v, err)
		}
	}
}

type hiddenParent struct {
	Embedded inner `name:"-"`
}

// Guarantee: `name:"-"` leaves the field's own name out of the path.
func TestNameDashLeavesFieldOut(t *testing.T) {
	err := validate.Struct("opts", hiddenParent{Embedded: inner{Low: 0, High: 1}})
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != "opts.low" {
		t.Fatalf("Struct = %v, want one error on opts.low", err)
	}
}

type hiddenList struct {
	Limits struct {
		Items []inner `name:"-" validate:"dive"`
	} `name:"limits"`
	Items []inner `name:"-" validate:"dive"`
}

// Guarantee: the elements of a field tagged `name:"-"` are named by their
// index on the path the field leaves out.
func TestNameDashKeepsTheIndexOfAnElement(t *testing.T) {
	var v hiddenList
	v.Limits.Items = []inner{{Low: 1, High: 2}, {Low: 0, High: 1}}
	v.Items = []inner{{Low: 0, High: 1}}
	err := validate.Struct("opts", v)
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("Struct = %v, want two errors", err)
	}
	got := []string{errs[0].Field, errs[1].Field}
	slices.Sort(got)
	if want := []string{"opts.limits[1].low", "opts[0].low"}; !slices.Equal(got, want) {
		t.Fatalf("errors on %q, want %q", got, want)
	}
}

type morePhrases struct {
	Size     int               `name:"size" validate:"gt=0"`
	Floor    int               `name:"floor"`
	Ceiling  int               `name:"ceiling" validate:"gtefield=Floor"`
	Brokers  string            `name:"brokers" validate:"omitempty,excludesall=/ "`
	Address  string            `name:"address" validate:"hostname_port"`
	Token    string            `name:"token"`
	Password string            `name:"password" validate:"excluded_with=Token"`
	Labels   map[string]string `name:"labels" validate:"max=1"`
	Ratio    string            `name:"ratio" validate:"startswith=x"`
	Tags     []string          `name:"tags" validate:"unique"`
}

// Guarantee: the rules the options use beside those of TestRulePhrases
// read as sentences too, and a map counts as a collection.
func TestMoreRulePhrases(t *testing.T) {
	err := validate.Struct("opts", morePhrases{
		Floor: 3, Ceiling: 2, Brokers: "a/b", Address: "nohost", Token: "t", Password: "p",
		Labels: map[string]string{"a": "1", "b": "2"}, Ratio: "y", Tags: []string{"x", "x"},
	})
	var errs validate.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Struct = %v", err)
	}
	want := map[string]string{
		"opts.size":     "opts.size must be > 0",
		"opts.ceiling":  "opts.ceiling must be ≥ floor",
		"opts.brokers":  `opts.brokers must not contain any of "/ "`,
		"opts.address":  "opts.address must be host:port",
		"opts.password": "opts.password must not be set when token is set",
		"opts.labels":   "opts.labels must have at most 1 element(s)",
		"opts.ratio":    "opts.ratio breaks rule startswith=x",
		"opts.tags":     "opts.tags must not repeat a value",
	}
	if len(errs) != len(want) {
		t.Errorf("got %d errors, want %d: %v", len(errs), len(want), err)
	}
	for _, e := range errs {
		if want[e.Field] != e.Message {
			t.Errorf("field %s: %q, want %q", e.Field, e.Message, want[e.Field])
		}
	}
}

type viaPointer struct {
	Limits *pair `name:"limits"`
}

// Guarantee: a cross-field rule in a struct reached through a pointer field
// names the other field by its name tag.
func TestCrossFieldRuleThroughPointer(t *testing.T) {
	err := validate.Struct("opts", viaPointer{Limits: &pair{LowWater: 3, High: 2, URL: "u"}})
	if want := "invalid options: opts.limits.high must be > low_water"; err == nil || err.Error() != want {
		t.Errorf("Struct = %v, want %q", err, want)
	}
}

// Guarantee: the fields of an anonymous struct are named in the paths like
// those of a named one.
func TestAnonymousStructFieldPaths(t *testing.T) {
	err := validate.Struct("opts", struct {
		Count  int `validate:"gte=1"`
		Limits pair
	}{Limits: pair{LowWater: 3, High: 2, URL: "u"}})
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 2 || !errs.Has("opts.count", "gte") || !errs.Has("opts.limits.high", "gtfield") {
		t.Fatalf("Struct = %v, want errors on opts.count and opts.limits.high", err)
	}
	if want := "opts.limits.high must be > low_water"; errs[1].Message != want {
		t.Errorf("nested message %q, want %q", errs[1].Message, want)
	}
	err = validate.Struct("", &struct {
		Count int `validate:"gte=1"`
	}{})
	if want := "invalid options: count must be ≥ 1"; err == nil || err.Error() != want {
		t.Errorf("Struct without prefix = %v, want %q", err, want)
	}
}

type hiddenOther struct {
	Client *int   `name:"-"`
	URL    string `name:"url" validate:"required_without=Client"`
}

// Guarantee: a cross-field rule names another field tagged `name:"-"` by
// its lower-camel Go name, not by "-".
func TestCrossFieldRuleNamesAHiddenFieldByItsGoName(t *testing.T) {
	err := validate.Struct("opts", hiddenOther{})
	if want := "invalid options: opts.url is required when client is not set"; err == nil || err.Error() != want {
		t.Errorf("Struct = %v, want %q", err, want)
	}
}
