package topic

import "github.com/boulevard-go/boulevard/internal/queue"

// isDone reports whether done is closed; a nil done never is.
func isDone(done <-chan struct{}) bool { return queue.IsDone(done) }
