// Package quote formats user-supplied strings and foreign error text for the
// errors of the topic packages: quoted, escaped and bounded in length, so an
// error never carries a raw control character, never spans lines and never
// grows with its input.
package quote

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxValue is how many bytes of a value Value shows before it truncates.
const MaxValue = 64

// MaxText is how many bytes of a foreign message Text keeps before it
// truncates.
const MaxText = 512

// Value returns s quoted and escaped as a Go string literal (strconv.Quote).
// A value longer than MaxValue bytes is cut at a character boundary, marked
// with "…" and followed by its length: "aaaa…" (1048576 bytes).
func Value(s string) string {
	if len(s) <= MaxValue {
		return strconv.Quote(s)
	}
	return strconv.Quote(prefix(s, MaxValue)+"…") + " (" + strconv.Itoa(len(s)) + " bytes)"
}

// URL is Value for a string meant as a URL or a host:port address, with
// the user information of its authority (what comes before the last "@"
// ahead of the path, after the scheme's "://" when there is one) shown as
// "xxxxx": it may hold a password or a token. "pulsar://svc:pw@host:6650"
// shows as "pulsar://xxxxx@host:6650".
func URL(s string) string { return Value(redactUserinfo(s)) }

func redactUserinfo(s string) string {
	start := 0
	if i := strings.Index(s, "://"); i >= 0 {
		start = i + len("://")
	}
	authority := s[start:]
	if end := strings.IndexAny(authority, "/?#"); end >= 0 {
		authority = authority[:end]
	}
	at := strings.LastIndexByte(authority, '@')
	if at < 0 {
		return s
	}
	return s[:start] + "xxxxx" + s[start+at:]
}

// Text makes a message written by another library safe to embed in an
// error: line breaks and the indentation after them become "; ", other
// control or non-printable characters and invalid UTF-8 are escaped as in
// a Go string literal, and a message longer than MaxText bytes is cut and
// followed by its length.
func Text(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); {
		r, size := utf8.DecodeRuneInString(msg[i:])
		switch {
		case r == '\n' || r == '\r':
			for i += size; i < len(msg) && strings.IndexByte("\r\n\t ", msg[i]) >= 0; i++ {
			}
			b.WriteString("; ")
			continue
		case r == utf8.RuneError && size == 1:
			q := strconv.Quote(msg[i : i+1])
			b.WriteString(q[1 : len(q)-1])
		case strconv.IsPrint(r):
			b.WriteString(msg[i : i+size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	out := b.String()
	if len(out) <= MaxText {
		return out
	}
	return prefix(out, MaxText) + "… (" + strconv.Itoa(len(msg)) + " bytes)"
}

// prefix returns the longest prefix of s of at most n bytes that does not
// split a UTF-8 sequence.
func prefix(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut > n-utf8.UTFMax && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
