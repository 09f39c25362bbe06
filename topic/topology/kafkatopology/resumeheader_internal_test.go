package kafkatopology

import (
	"testing"

	"github.com/IBM/sarama"
)

// Guarantee: a record whose topology-resume header is "0" (as another
// producer may write it) reads as a letter that does not resume its key,
// as one without the header does; of a repeated header the last counts.
func TestAResumeHeaderOfZeroReadsAsNotResuming(t *testing.T) {
	b := fuzzBackend()
	for _, tc := range []struct {
		values []string
		want   bool
	}{
		{nil, false},
		{[]string{"0"}, false},
		{[]string{"1"}, true},
		{[]string{"1", "0"}, false},
		{[]string{"0", "1"}, true},
	} {
		var hs []sarama.RecordHeader
		for _, v := range tc.values {
			hs = append(hs, header(HeaderResume, v))
		}
		l, _, err := decodeLetter(b, record("k", []byte(`{"Key":"k","N":1}`), hs))
		if err != nil {
			t.Fatalf("a record with %s %q does not decode: %v", HeaderResume, tc.values, err)
		}
		if l.Resume != tc.want {
			t.Errorf("a record with %s %q reads as Resume %v, want %v", HeaderResume, tc.values, l.Resume, tc.want)
		}
	}
}
