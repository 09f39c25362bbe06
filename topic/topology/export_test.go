package topology

import "fmt"

// CheckSequencer returns an error when the counts a sequenced source's
// MaxHeldBack decisions rest on disagree with its keys: the letters
// waiting, the keys with letters waiting and those of them whose message
// is out in the backend (nil for a source that is not sequenced).
func CheckSequencer[T any](s *Source[T]) error {
	q := s.seq
	if q == nil {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	held, waiting, out := 0, 0, 0
	for _, ks := range q.keys {
		held += len(ks.waiting)
		if len(ks.waiting) > 0 {
			waiting++
			if ks.out {
				out++
			}
		}
	}
	if held != q.held || waiting != q.waitingKeys || out != q.outKeys {
		return fmt.Errorf("sequencer counts %d held, %d keys waiting, %d of them out; its keys hold %d, %d, %d",
			q.held, q.waitingKeys, q.outKeys, held, waiting, out)
	}
	return nil
}

// WaitingKeys returns the keys a sequenced source holds letters back for.
func WaitingKeys[T any](s *Source[T]) []string {
	if s.seq == nil {
		return nil
	}
	s.seq.mu.Lock()
	defer s.seq.mu.Unlock()
	var keys []string
	for k, ks := range s.seq.keys {
		if len(ks.waiting) > 0 {
			keys = append(keys, k)
		}
	}
	return keys
}

// HandOffFailedLog is the message a source logs for a refused hand-off.
const HandOffFailedLog = handOffFailedLog

// RefusedLog and RecoveredLog are the lines a source logs when a full
// queue starts refusing its hand-offs, and once it took them all.
const (
	RefusedLog   = refusedLog
	RecoveredLog = recoveredLog
)

// RetiredCloseFailedLog is the message a source logs when the closing of
// a failed run's reader fails.
const RetiredCloseFailedLog = retiredCloseFailedLog

// BroadcastCloseFailedLog is the message a source logs when the closing
// of a broadcast run's reader fails.
const BroadcastCloseFailedLog = broadcastCloseFailedLog

// GiveBackFailedLog is the message a source logs when the backend fails
// to take back the letters held back from a failed run's reader.
const GiveBackFailedLog = giveBackFailedLog

// PoisonedKeyText returns what a sequenced source keeps for poisoned key:
// the death error of its later messages ("" for a key it does not
// remember, or a source that is not sequenced).
func PoisonedKeyText[T any](s *Source[T], key string) string {
	if s.seq == nil {
		return ""
	}
	return s.seq.follow(key)
}
