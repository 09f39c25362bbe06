package connector

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/xdg-go/scram"
)

// A SCRAM conversation refuses a server whose final message does not prove
// that it holds the user's credentials, and a password that SASLprep
// refuses is an error at its start, not a conversation.
func TestSCRAMRefusesAServerThatCannotProveThePassword(t *testing.T) {
	s := &scramClient{gen: scram.SHA256}
	if err := s.Begin("svc", "pw\x07", ""); err == nil {
		t.Errorf("Begin with a password holding a control character = nil, want SASLprep's error")
	}
	if err := s.Begin("svc", "pw", ""); err != nil {
		t.Fatal(err)
	}
	first, err := s.Step("")
	if err != nil {
		t.Fatal(err)
	}
	_, nonce, ok := strings.Cut(first, ",r=")
	if !ok {
		t.Fatalf("client-first message %q has no nonce", first)
	}
	salt := base64.StdEncoding.EncodeToString([]byte("salt"))
	if _, err := s.Step("r=" + nonce + "server,s=" + salt + ",i=4096"); err != nil {
		t.Fatal(err)
	}
	forged := "v=" + base64.StdEncoding.EncodeToString(make([]byte, 32))
	if _, err := s.Step(forged); err == nil {
		t.Errorf("the conversation accepted a server final message %q that proves nothing", forged)
	}
}
