package pulsar_test

import (
	"context"
	"errors"
	"testing"

	bpulsar "github.com/boulevard-go/boulevard/sources/pulsar"
)

// TestANilSourceReportsErrNotCreated checks that a nil *Source answers
// every method, as the Kafka sources' do, instead of panicking: Run,
// Validate and Info return ErrNotCreated, Stats are empty and Close
// returns nil.
func TestANilSourceReportsErrNotCreated(t *testing.T) {
	var s *bpulsar.Source
	if err := s.Run(context.Background(), nil); !errors.Is(err, bpulsar.ErrNotCreated) {
		t.Errorf("Run = %v, want ErrNotCreated", err)
	}
	if err := s.Validate(); !errors.Is(err, bpulsar.ErrNotCreated) {
		t.Errorf("Validate = %v, want ErrNotCreated", err)
	}
	if _, err := s.Info(); !errors.Is(err, bpulsar.ErrNotCreated) {
		t.Errorf("Info = %v, want ErrNotCreated", err)
	}
	if st := s.Stats(); st != (bpulsar.Stats{}) {
		t.Errorf("Stats = %+v, want none", st)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Errorf("Close = %v, want nil", err)
	}
}
