package message_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// lineMetadata is what a source that reads lines from files knows about
// each line.
type lineMetadata struct {
	Path string
	Line int
}

// report is an acknowledger that prints the outcomes it is told.
type report struct{}

func (report) Ack(_ context.Context, successful, failed []acker.Outcome) {
	for _, o := range successful {
		fmt.Printf("acked %d (%v)\n", o.ID, o.Data)
	}
	for _, o := range failed {
		fmt.Printf("failed %d (%v): %v, disposition %s\n", o.ID, o.Data, o.Err, o.Disposition)
	}
}

// A source makes a message for each record: the payload, the acknowledger
// its outcome goes back to and the record's id, with its metadata and the
// ack data its acknowledger needs. Handlers read the metadata with
// MetadataAs; the stage that handles the message last reports its outcome,
// as AddTo and a flushed acker.Group do here.
func ExampleNew() {
	m := message.New([]byte("GET /index.html"), report{}, 7)
	m.Metadata = &lineMetadata{Path: "access.log", Line: 7}
	m.SetAckData("access.log:7")

	if md, ok := message.MetadataAs[*lineMetadata](m); ok {
		fmt.Printf("%s line %d: %s\n", md.Path, md.Line, m.Data)
	}

	var g acker.Group
	m.AddTo(&g)
	g.Flush(context.Background(), nil)
	// Output:
	// access.log line 7: GET /index.html
	// acked 7 (access.log:7)
}

// A handler that cannot handle a message fails it; the acknowledger gets
// the error among the failed outcomes, with the disposition the handler
// (or a failure hook) chose for it.
func ExampleMessage_Fail() {
	m := message.New("not json", report{}, 12)
	m.Fail(errors.New("invalid character 'o' in literal null"))
	m.SetDisposition(acker.DispositionDiscard)

	fmt.Println(m.Status(), m.Failed())
	var g acker.Group
	m.AddTo(&g)
	g.Flush(context.Background(), nil)
	// Output:
	// failed true
	// failed 12 (<nil>): invalid character 'o' in literal null, disposition discard
}

// A source that makes many messages can take them from a Slab: one
// allocation for a block of messages instead of one per message. Each
// message is new and stays the source's to hand over, as with New.
func ExampleSlab() {
	var slab message.Slab[string]
	var batch []*message.Message[string]
	for i, line := range []string{"alpha", "beta", "gamma"} {
		batch = append(batch, slab.New(line, report{}, uint64(100+i)))
	}
	batch[1].Fail(nil)

	var g acker.Group
	for _, m := range batch {
		m.AddTo(&g)
	}
	g.Flush(context.Background(), nil)
	// Output:
	// acked 100 (<nil>)
	// acked 102 (<nil>)
	// failed 101 (<nil>): message: failed, disposition default
}
