package message_test

import (
	"testing"

	"github.com/boulevard-go/boulevard/acker"
	"github.com/boulevard-go/boulevard/message"
)

// Guarantee: the package's functions take a nil message without
// panicking: AckImmediately skips it, MetadataAs reports no metadata, and
// Transfer and Detach with a nil dst or src do nothing.
func TestTheFunctionsOfTheMessagesTakeANilOne(t *testing.T) {
	var none *message.Message[int]
	m := message.New(1, acker.Discard, 1)
	dst := message.New(5, acker.Discard, 5)
	var md *kafkaMeta
	ok := true
	calls := map[string]func(){
		"AckImmediately":    func() { message.AckImmediately(m, none) },
		"MetadataAs":        func() { md, ok = message.MetadataAs[*kafkaMeta](none) },
		"Transfer to nil":   func() { message.Transfer(none, m, 2) },
		"Transfer from nil": func() { message.Transfer(dst, none, 2) },
		"Detach to nil":     func() { message.Detach(none, m, 2) },
		"Detach from nil":   func() { message.Detach(dst, none, 2) },
	}
	for name, call := range calls {
		var err error
		func() {
			defer message.Recover(&err)
			call()
		}()
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !m.AckRequested() {
		t.Error("AckImmediately given a nil message among others skipped the others")
	}
	if ok || md != nil {
		t.Errorf("MetadataAs of a nil message = %v, %t; want nil, false", md, ok)
	}
	if dst.Data != 5 || dst.Acknowledged() {
		t.Errorf("Transfer or Detach from a nil message changed dst: %v", dst)
	}
}
