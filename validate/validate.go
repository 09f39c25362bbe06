// Package validate checks option structs before anything starts and turns
// the findings of go-playground/validator into errors that name the option
// field and the rule it breaks, for example
//
//	processors.concurrency must be ≥ 1
//	producer.flow.threshold must be < initial
//
// Field names are the lower-camel form of the Go field names joined with dots,
// rooted at the prefix the caller gives, so that the message points at the
// place in the options literal the user has to change. A field with a `name`
// tag is named by the tag instead (the options that YAML configuration also
// sets use its snake_case keys, such as "max_in_flight"), and `name:"-"`
// leaves the field's own name out of the path (an element of such a field
// keeps its index: "opts.limits[1].low").
package validate

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/go-playground/validator/v10"
)

// ErrInvalid is the sentinel every validation error wraps: errors.Is(err,
// validate.ErrInvalid) tells an option problem from a runtime failure.
var ErrInvalid = errors.New("invalid options")

// FieldError is one broken rule on one field.
type FieldError struct {
	// Field is the dotted path of the field, for example "producer.flow.threshold".
	Field string
	// Rule is the validator tag that failed, for example "gte" or "ltfield".
	Rule string
	// Param is the rule's parameter, for example "1" for gte=1; for rules
	// that refer to other fields (ltfield, required_with, …) it is the
	// other field's name as paths write it (its name tag, else its
	// lower-camel Go name), several joined with " or ".
	Param string
	// Message is the complete human sentence, for example
	// "producer.flow.threshold must be < initial".
	Message string
	// Err is the error Join was given when it was not a FieldError (a
	// source's own option check, a panic in it), so that errors.Is and
	// errors.As still find it; nil for the rules Struct checks.
	Err error
}

// Error returns the human sentence.
func (e *FieldError) Error() string { return e.Message }

// Unwrap returns ErrInvalid, and Err when it is set.
func (e *FieldError) Unwrap() []error {
	if e.Err != nil {
		return []error{ErrInvalid, e.Err}
	}
	return []error{ErrInvalid}
}

// Errors is the list of every broken rule found in one options value. It is
// returned as an error by Struct and carries all problems, not only the first.
type Errors []*FieldError

// Error joins the messages with "; ".
func (es Errors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Message
	}
	return "invalid options: " + strings.Join(parts, "; ")
}

// Unwrap returns the individual field errors, so errors.Is(err, ErrInvalid)
// and errors.As(err, new(*FieldError)) work on the list.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Has reports whether the list holds an error for field, optionally for one
// rule (empty rule matches any).
func (es Errors) Has(field, rule string) bool {
	for _, e := range es {
		if e.Field == field && (rule == "" || e.Rule == rule) {
			return true
		}
	}
	return false
}

// validatorInstance is built once: validator caches per-type parsing of the
// struct tags, which is the expensive part. It holds no configuration that
// callers can change.
var validatorInstance = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		if name, ok := f.Tag.Lookup("name"); ok {
			// "-" stays in the namespace (an empty name would make the
			// validator use the Go name) and convert drops it.
			return name
		}
		return lowerFirst(f.Name)
	})
	if err := v.RegisterValidation("name", func(fl validator.FieldLevel) bool {
		return fl.Field().Kind() == reflect.String && ValidName(fl.Field().String())
	}); err != nil {
		panic(err) // a programming error: the tag name is fixed
	}
	return v
})

// NameMaxLen is the longest name, in bytes, the "name" rule accepts.
const NameMaxLen = 255

// NamePunctuation is the punctuation a name may hold besides letters and
// digits.
const NamePunctuation = "-_.:/@"

// ValidName reports whether s is a valid name for a pipeline, a stage or a
// batcher (the "name" rule): 1 to NameMaxLen bytes of Unicode letters,
// Unicode digits and the characters of NamePunctuation. Whitespace, control
// characters, quotes and invalid UTF-8 are refused, so that a name can be
// written into logs and error messages as it is.
func ValidName(s string) bool {
	if s == "" || len(s) > NameMaxLen || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !strings.ContainsRune(NamePunctuation, r) {
			return false
		}
	}
	return true
}

// Struct validates v (a struct or pointer to struct) against its `validate`
// tags. prefix replaces the struct's own type name at the root of every field
// path ("" leaves the paths relative). It returns nil or an Errors value;
// a v that is not a struct, a programming error, is an error wrapping
// ErrInvalid and the validator's *validator.InvalidValidationError.
func Struct(prefix string, v any) error {
	err := validatorInstance().Struct(v)
	if err == nil {
		return nil
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		// InvalidValidationError: a programming error (nil or non-struct).
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	// The namespace starts with the root type's name, which for a generic
	// type holds package paths with dots in them: strip it whole.
	root := ""
	t := reflect.TypeOf(v)
	if t != nil {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		root = t.Name()
	}
	out := make(Errors, 0, len(verrs))
	for _, fe := range verrs {
		out = append(out, convert(prefix, root, t, fe))
	}
	return out
}

// Join merges the results of several Struct calls (nil entries are skipped)
// into one Errors value, or nil when there is none. Any other error becomes
// a FieldError of rule "invalid" with its message, holding it as Err.
func Join(errs ...error) error {
	var out Errors
	for _, err := range errs {
		if err == nil {
			continue
		}
		var es Errors
		var fe *FieldError
		switch {
		case errors.As(err, &es):
			out = append(out, es...)
		case errors.As(err, &fe):
			out = append(out, fe)
		default:
			out = append(out, &FieldError{Rule: "invalid", Message: err.Error(), Err: err})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Field builds a FieldError for a rule that struct tags cannot express (for
// example "batchers[1].name must be unique").
func Field(field, rule, message string) *FieldError {
	return &FieldError{Field: field, Rule: rule, Message: field + " " + message}
}

func convert(prefix, root string, rootType reflect.Type, fe validator.FieldError) *FieldError {
	ns := fe.Namespace()
	// Drop the root struct name validator puts first.
	switch {
	case root == "":
		// An anonymous struct: the namespace starts at its fields.
	case strings.HasPrefix(ns, root+"."):
		ns = ns[len(root)+1:]
	case ns == root:
		ns = ""
	default:
		if i := strings.IndexByte(ns, '.'); i >= 0 {
			ns = ns[i+1:]
		} else {
			ns = ""
		}
	}
	field := dropHidden(ns)
	if prefix != "" {
		switch {
		case field == "":
			field = prefix
		case field[0] == '[': // an element of a hidden field at the top
			field = prefix + field
		default:
			field = prefix + "." + field
		}
	}
	param := fe.Param()
	if crossField(fe.Tag()) && param != "" {
		param = otherFields(rootType, root, fe.StructNamespace(), param)
	}
	return &FieldError{
		Field:   field,
		Rule:    fe.Tag(),
		Param:   param,
		Message: field + " " + phrase(fe.Tag(), param, fe.Kind()),
	}
}

func phrase(tag, param string, kind reflect.Kind) string {
	collection := kind == reflect.Slice || kind == reflect.Map || kind == reflect.Array
	switch tag {
	case "required":
		return "is required"
	case "min", "gte":
		if kind == reflect.String { // the rule counts runes
			return "must be at least " + param + " characters long"
		}
		if collection {
			return "must have at least " + param + " element(s)"
		}
		return "must be ≥ " + param
	case "max", "lte":
		if kind == reflect.String {
			return "must be at most " + param + " characters long"
		}
		if collection {
			return "must have at most " + param + " element(s)"
		}
		return "must be ≤ " + param
	case "gt":
		return "must be > " + param
	case "lt":
		return "must be < " + param
	case "ltfield":
		return "must be < " + param
	case "ltefield":
		return "must be ≤ " + param
	case "gtfield":
		return "must be > " + param
	case "gtefield":
		return "must be ≥ " + param
	case "required_with":
		return "is required when " + param + " is set"
	case "required_without":
		return "is required when " + param + " is not set"
	case "excluded_with":
		return "must not be set when " + param + " is set"
	case "excluded_without":
		return "must not be set when " + param + " is not set"
	case "oneof":
		return "must be one of [" + param + "]"
	case "unique":
		return "must not repeat a value"
	case "excludesall":
		return "must not contain any of " + fmt.Sprintf("%q", param)
	case "hostname_port":
		return "must be host:port"
	case "url":
		return "must be a URL"
	case "name":
		return fmt.Sprintf("must be 1 to %d letters, digits or %q", NameMaxLen, NamePunctuation)
	default:
		if param != "" {
			return "breaks rule " + tag + "=" + param
		}
		return "breaks rule " + tag
	}
}

// crossField reports whether a rule's parameter names other fields of the
// same struct (ltfield=Low, required_with=KeyFile).
func crossField(tag string) bool {
	return strings.HasSuffix(tag, "field") || strings.HasSuffix(tag, "_with") || strings.HasSuffix(tag, "_without")
}

// otherFields turns the Go field names of a cross-field rule's parameter
// into the names the paths use (the name tag, else the lower-camel form),
// joined with " or ". The fields belong to the struct that holds the field
// at ns, the field's struct namespace under the root type.
func otherFields(rootType reflect.Type, root, ns, param string) string {
	parent := parentStruct(rootType, root, ns)
	names := strings.Fields(param)
	for i, n := range names {
		names[i] = lowerFirst(n)
		if parent == nil {
			continue
		}
		if f, ok := parent.FieldByName(n); ok {
			if tag, ok := f.Tag.Lookup("name"); ok && tag != "-" {
				names[i] = tag
			}
		}
	}
	return strings.Join(names, " or ")
}

// parentStruct returns the struct type that holds the field at ns (a
// validator struct namespace such as "Root.Items[0].High"), or nil when it
// cannot be followed.
func parentStruct(t reflect.Type, root, ns string) reflect.Type {
	if t == nil || t.Kind() != reflect.Struct {
		return nil
	}
	if root == "" {
		// An anonymous struct: the namespace starts at its fields.
	} else if strings.HasPrefix(ns, root+".") {
		ns = ns[len(root)+1:]
	} else if i := strings.IndexByte(ns, '.'); i >= 0 {
		ns = ns[i+1:]
	} else {
		return t
	}
	segs := strings.Split(ns, ".")
	for _, seg := range segs[:len(segs)-1] {
		name, _, _ := strings.Cut(seg, "[")
		f, ok := t.FieldByName(name)
		if !ok {
			return nil
		}
		t = f.Type
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		for range strings.Count(seg, "[") {
			switch t.Kind() {
			case reflect.Slice, reflect.Array, reflect.Map:
				t = t.Elem()
			default:
				return nil
			}
			for t.Kind() == reflect.Pointer {
				t = t.Elem()
			}
		}
		if t.Kind() != reflect.Struct {
			return nil
		}
	}
	return t
}

// dropHidden removes from a namespace the segments of the fields tagged
// `name:"-"`; the index of an element of such a field (a "-[2]" segment)
// stays, on the segment before it.
func dropHidden(ns string) string {
	if ns != "-" && !strings.HasPrefix(ns, "-.") && !strings.HasPrefix(ns, "-[") && !strings.Contains(ns, ".-") {
		return ns
	}
	segs := strings.Split(ns, ".")
	kept := segs[:0]
	for _, seg := range segs {
		switch {
		case seg == "-":
		case strings.HasPrefix(seg, "-["):
			if len(kept) == 0 {
				kept = append(kept, seg[1:])
			} else {
				kept[len(kept)-1] += seg[1:]
			}
		default:
			kept = append(kept, seg)
		}
	}
	return strings.Join(kept, ".")
}

func lowerFirst(s string) string {
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError || unicode.IsLower(r) {
		return s
	}
	// Keep acronyms readable: "TLS" -> "tls", "URL" -> "url".
	if len(s) > 1 && strings.ToUpper(s) == s {
		return strings.ToLower(s)
	}
	return string(unicode.ToLower(r)) + s[n:]
}
