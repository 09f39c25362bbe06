package producer

import "time"

// The producer runtime under the names the package's tests use.
type (
	Producer[T any]  = runtime[T]
	Config[T any]    = runtimeConfig[T]
	Output[T any]    = output[T]
	TryOutput[T any] = directOutput[T]
)

// New builds the producer runtime; opts must carry its defaults.
func New[T any](opts Options[T], cfg Config[T]) *Producer[T] { return newRuntime(opts, cfg) }

// SetGrantStallWarning sets how long Feed.Close waits for a grant in
// progress before it logs, until the test ends.
func SetGrantStallWarning(t interface{ Cleanup(func()) }, d time.Duration) {
	old := grantStallWarning
	grantStallWarning = d
	t.Cleanup(func() { grantStallWarning = old })
}

// LockStage holds the stage's mutex until the returned function is called.
func LockStage[T any](s *Stage[T]) (unlock func()) {
	s.mu.Lock()
	return s.mu.Unlock
}

// WithdrawScanned is the number of buffer entries withdrawals visited.
func WithdrawScanned[T any](s *Stage[T]) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.scanned
}

// WithdrawWaiting is the number of withdrawals waiting for the stage.
func WithdrawWaiting[T any](s *Stage[T]) int {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return len(s.withdrawals)
}
