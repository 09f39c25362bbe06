package validate_test

import (
	"errors"
	"testing"

	"github.com/boulevard-go/boulevard/validate"
)

type endpoint struct {
	URL string `validate:"required"`
	ID  int    `validate:"gte=1"`
}

// Guarantee: a field whose name is an all-capital acronym is lower-cased
// whole in the path ("URL" -> "url", not "uRL").
func TestAcronymFieldNames(t *testing.T) {
	err := validate.Struct("opts", endpoint{})
	var errs validate.Errors
	if !errors.As(err, &errs) || !errs.Has("opts.url", "required") || !errs.Has("opts.id", "gte") {
		t.Fatalf("Struct = %v, want opts.url and opts.id", err)
	}
}

type limits struct {
	Max   int      `name:"max" validate:"lte=5"`
	Less  int      `name:"less" validate:"lt=5"`
	Tags  []string `name:"tags" validate:"min=1"`
	Names []string `name:"names" validate:"max=1"`
	Low   int      `name:"low"`
	High  int      `name:"high" validate:"ltefield=Low"`
}

// Guarantee: every rule the package phrases reads correctly, for numbers and
// for collections.
func TestRulePhrases(t *testing.T) {
	err := validate.Struct("opts", limits{Max: 6, Less: 5, Names: []string{"a", "b"}, Low: 1, High: 2})
	var errs validate.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Struct = %v", err)
	}
	want := map[string]string{
		"opts.max":   "opts.max must be ≤ 5",
		"opts.less":  "opts.less must be < 5",
		"opts.tags":  "opts.tags must have at least 1 element(s)",
		"opts.names": "opts.names must have at most 1 element(s)",
		"opts.high":  "opts.high must be ≤ low",
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors: %v", len(errs), err)
	}
	for _, e := range errs {
		if want[e.Field] != e.Message {
			t.Errorf("field %s: %q, want %q", e.Field, e.Message, want[e.Field])
		}
	}
}

type pair struct {
	CertFile string `name:"cert_file" validate:"required_with=KeyFile"`
	KeyFile  string `name:"key_file" validate:"required_with=CertFile"`
	LowWater int    `name:"low_water"`
	High     int    `name:"high" validate:"gtfield=LowWater"`
	Client   *int   `name:"client"`
	URL      string `validate:"required_without=Client"`
}

// Guarantee: a rule that refers to another field names that field as the
// paths do (its name tag, not its Go name), and reads as a sentence.
func TestCrossFieldRulesNameTheOtherField(t *testing.T) {
	err := validate.Struct("opts", pair{KeyFile: "k.pem", LowWater: 3, High: 2})
	var errs validate.Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Struct = %v", err)
	}
	want := map[string]string{
		"opts.cert_file": "opts.cert_file is required when key_file is set",
		"opts.high":      "opts.high must be > low_water",
		"opts.url":       "opts.url is required when client is not set",
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors: %v", len(errs), err)
	}
	for _, e := range errs {
		if want[e.Field] != e.Message {
			t.Errorf("field %s: %q, want %q", e.Field, e.Message, want[e.Field])
		}
	}
	err = validate.Struct("opts", pairs{Items: []*pair{{CertFile: "c", KeyFile: "k", LowWater: 3, URL: "u"}}})
	if want := "invalid options: opts.items[0].high must be > low_water"; err == nil || err.Error() != want {
		t.Errorf("nested: Struct = %v, want %q", err, want)
	}
}

type pairs struct {
	Items []*pair `validate:"dive"`
}

type label struct {
	Short string `name:"short" validate:"max=3"`
	Long  string `name:"long" validate:"min=3"`
}

// Guarantee: a length rule on a string reads in characters, the unit the
// rule counts (runes), not in elements.
func TestStringLengthRulesSayCharacters(t *testing.T) {
	err := validate.Struct("opts", label{Short: "abcd", Long: "ab"})
	var errs validate.Errors
	if !errors.As(err, &errs) || len(errs) != 2 {
		t.Fatalf("Struct = %v, want two errors", err)
	}
	want := map[string]string{
		"opts.short": "opts.short must be at most 3 characters long",
		"opts.long":  "opts.long must be at least 3 characters long",
	}
	for _, e := range errs {
		if want[e.Field] != e.Message {
			t.Errorf("field %s: %q, want %q", e.Field, e.Message, want[e.Field])
		}
	}
}
