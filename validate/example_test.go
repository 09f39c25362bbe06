package validate_test

import (
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/validate"
)

// FileSourceOptions are the options of a user's own source, checked the
// way Boulevard checks its own: tags for the rules, and a Field error for
// a rule that tags cannot say.
type FileSourceOptions struct {
	// Path is the file to read. Required.
	Path string `validate:"required"`
	// Name names the source in logs and metrics.
	Name string `validate:"omitempty,name"`
	// BufferSize is the read buffer in bytes, 4 KiB to 16 MiB.
	BufferSize int `validate:"gte=4096,lte=16777216"`
	// Follow keeps reading as the file grows; it needs a Path that is not
	// standard input.
	Follow bool
}

// Validate reports every broken rule at once, each naming its field.
func (o FileSourceOptions) Validate() error {
	var follow error
	if o.Follow && o.Path == "-" {
		follow = validate.Field("filesource.follow", "stdin", "cannot follow standard input")
	}
	return validate.Join(validate.Struct("filesource", &o), follow)
}

// Struct turns the validator's findings into errors that name the field
// as the user wrote it and the rule it breaks; Join gathers them with the
// rules checked by hand.
func ExampleStruct() {
	err := FileSourceOptions{Path: "-", Name: "access log", BufferSize: 512, Follow: true}.Validate()
	fmt.Println(err)
	fmt.Println(errors.Is(err, validate.ErrInvalid))

	var es validate.Errors
	if errors.As(err, &es) {
		fmt.Println(es.Has("filesource.bufferSize", "gte"), len(es))
	}
	// Output:
	// invalid options: filesource.name must be 1 to 255 letters, digits or "-_.:/@"; filesource.bufferSize must be ≥ 4096; filesource.follow cannot follow standard input
	// true
	// true 3
}
