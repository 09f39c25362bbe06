package validate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-playground/validator/v10"
	"go.uber.org/goleak"

	"github.com/boulevard-go/boulevard/validate"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type inner struct {
	Low  int `validate:"gte=1"`
	High int `validate:"gtfield=Low"`
}

type outer struct {
	Name   string  `validate:"required"`
	Mode   string  `name:"mode" validate:"omitempty,oneof=a b"`
	Inner  inner   `name:"inner"`
	Items  []inner `validate:"dive"`
	Hidden int     `name:"-" validate:"gte=0"`
}

// Guarantee: errors name the dotted lower-camel field path under the prefix
// and the rule, and wrap ErrInvalid.
func TestStructErrors(t *testing.T) {
	err := validate.Struct("opts", outer{Mode: "c", Inner: inner{Low: 0, High: 0}, Items: []inner{{Low: 2, High: 1}}})
	var errs validate.Errors
	if !errors.As(err, &errs) || !errors.Is(err, validate.ErrInvalid) {
		t.Fatalf("Struct = %v", err)
	}
	want := map[string]string{
		"opts.name":          "opts.name is required",
		"opts.mode":          "opts.mode must be one of [a b]",
		"opts.inner.low":     "opts.inner.low must be ≥ 1",
		"opts.inner.high":    "opts.inner.high must be > low",
		"opts.items[0].high": "opts.items[0].high must be > low",
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors: %v", len(errs), err)
	}
	for _, e := range errs {
		if want[e.Field] != e.Message {
			t.Fatalf("field %s: %q, want %q", e.Field, e.Message, want[e.Field])
		}
	}
	var fe *validate.FieldError
	if !errors.As(err, &fe) {
		t.Fatal("errors.As must find a *FieldError in Errors")
	}
}

func TestValidStructIsNil(t *testing.T) {
	if err := validate.Struct("", outer{Name: "x", Inner: inner{Low: 1, High: 2}}); err != nil {
		t.Fatal(err)
	}
}

func TestJoinAndField(t *testing.T) {
	if validate.Join(nil, nil) != nil {
		t.Fatal("Join of nils must be nil")
	}
	err := validate.Join(validate.Struct("", outer{Inner: inner{Low: 1, High: 2}}), validate.Field("x[1].name", "unique", "must be unique"))
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 2 || !errs.Has("x[1].name", "unique") || !errs.Has("name", "required") {
		t.Fatalf("Join = %v", err)
	}
	if err.Error() != "invalid options: name is required; x[1].name must be unique" {
		t.Fatalf("Error() = %q", err.Error())
	}
}

type payload struct{ ID int }

type generic[T any] struct {
	Value T
	Count int `name:"count" validate:"gte=1"`
}

// Guarantee: field paths stay clean for generic option types instantiated
// with named types from other packages (whose names contain dots).
func TestGenericRootName(t *testing.T) {
	err := validate.Struct("opts", &generic[payload]{})
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Field != "opts.count" || errs[0].Message != "opts.count must be ≥ 1" {
		t.Fatalf("Struct = %v", err)
	}
	err = validate.Struct("", generic[payload]{})
	if !errors.As(err, &errs) || !errs.Has("count", "gte") {
		t.Fatalf("Struct without prefix = %v", err)
	}
}

type named struct {
	Name string `name:"name" validate:"required,name"`
}

// Guarantee: the "name" rule accepts letters, digits and NamePunctuation and
// refuses whitespace, control characters, quotes and over-long names, with
// an error that does not echo the value.
func TestNameRule(t *testing.T) {
	for _, good := range []string{"orders", "orders-v2.eu_west:1/a@b", "zahlungsströme", "支付"} {
		if err := validate.Struct("opts", named{Name: good}); err != nil || !validate.ValidName(good) {
			t.Errorf("%q refused: %v", good, err)
		}
	}
	long := strings.Repeat("a", validate.NameMaxLen+1)
	for _, bad := range []string{"a b", "a\nb", "evil\x1b[31m", "tab\t", `q"uote`, "\xff", long} {
		err := validate.Struct("opts", named{Name: bad})
		var errs validate.Errors
		if !errors.As(err, &errs) || !errs.Has("opts.name", "name") || validate.ValidName(bad) {
			t.Errorf("%q accepted: %v", bad, err)
			continue
		}
		if msg := err.Error(); strings.ContainsAny(msg, "\n\x1b\t") || strings.Contains(msg, "evil") {
			t.Errorf("error for %q echoes it raw: %q", bad, msg)
		}
	}
}

// Struct given something that is not a struct returns an error wrapping
// ErrInvalid and the validator's own *InvalidValidationError.
func TestStructOfANonStructKeepsTheValidatorsError(t *testing.T) {
	for _, v := range []any{nil, 42} {
		err := validate.Struct("opts", v)
		var ive *validator.InvalidValidationError
		if !errors.Is(err, validate.ErrInvalid) || !errors.As(err, &ive) {
			t.Errorf("Struct(%#v) = %v, want an error wrapping ErrInvalid and a *validator.InvalidValidationError", v, err)
		}
	}
}
