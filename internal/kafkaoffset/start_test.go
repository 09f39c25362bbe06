package kafkaoffset_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/boulevard-go/boulevard/internal/kafkaoffset"
	"github.com/boulevard-go/boulevard/internal/testbroker"
	"github.com/boulevard-go/boulevard/internal/wait"
)

// startAgainst starts the offsets of group gid of a new topic holding
// three records, at its log end, while the broker answers the group's
// OffsetCommit requests with code (0: by dropping the connection) until
// the first such answer has gone out (a passing fault) or for good
// (always). It returns the Start StartOffsets returned, the offset then
// committed on the partition (-1: none) and StartOffsets' error.
func startAgainst(t *testing.T, code int16, always bool) (kafkaoffset.Start, int64, error) {
	t.Helper()
	c := testbroker.Kafka(t)
	brokers := c.ListenAddrs()
	const kname, gid = "orders", "billing"
	testbroker.ExistingTopic(t, c, kname, 1, 3, func(v int) ([]byte, error) { return []byte(strconv.Itoa(v)), nil })
	client, err := sarama.NewClient(brokers, testbroker.SaramaConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	admin := testbroker.Admin(t, brokers)
	commits := testbroker.Inject(c, kmsg.OffsetCommit, code, testbroker.CommitsOf(gid))
	commits.Every(1)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	type result struct {
		st  kafkaoffset.Start
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := kafkaoffset.StartOffsets(ctx, client, admin, kname, gid, sarama.OffsetNewest, client.Config().Version)
		done <- result{st, err}
	}()
	if !always {
		wait.Within(t, 10*time.Second, "a refused commit", func() bool { return commits.Failed() > 0 })
		commits.Every(0)
	}
	r := <-done
	if commits.Failed() == 0 {
		t.Fatal("no commit was refused: the test checks nothing")
	}
	return r.st, testbroker.Committed(t, admin, kname, gid)[0], r.err
}

// Guarantee: a commit of the starting offsets that the coordinator
// refuses for a passing reason (it moved, or is loading), or whose
// connection drops unanswered, is sent again:
// the group still starts at the log end, as asked, not at the oldest
// record as after a refusal by members elsewhere.
func TestStartOffsetsRetriesACommitTheCoordinatorRefusesForAWhile(t *testing.T) {
	for _, tc := range []struct {
		name string
		code int16
	}{
		{"coordinator moved", kerr.NotCoordinator.Code},
		{"coordinator not available", kerr.CoordinatorNotAvailable.Code},
		{"coordinator loading", kerr.CoordinatorLoadInProgress.Code},
		{"connection dropped", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, committed, err := startAgainst(t, tc.code, false)
			if err != nil || st.Refused != nil || st.Backlog != 3 || committed != 3 {
				t.Fatalf("StartOffsets = %+v, %v, committed %d; want a backlog of 3, no refusal, committed 3 (the log end)", st, err, committed)
			}
		})
	}
}

// Guarantee: a commit of the starting offsets refused for lack of
// permission fails StartOffsets with the refusal, at once: it is not taken
// for members elsewhere having started the group.
func TestStartOffsetsFailsOnADeniedCommit(t *testing.T) {
	start := time.Now()
	st, committed, err := startAgainst(t, kerr.GroupAuthorizationFailed.Code, true)
	if !errors.Is(err, sarama.ErrGroupAuthorizationFailed) || st.Refused != nil || committed != -1 || time.Since(start) > 10*time.Second {
		t.Fatalf("StartOffsets = %+v, %v, committed %d after %v; want the denial at once, nothing committed", st, err, committed, time.Since(start))
	}
}

// Guarantee: StartOffsets starts a group only at the log end or the log
// start: any other offset is refused before a request is sent.
func TestStartOffsetsRefusesAStartOtherThanNewestOrOldest(t *testing.T) {
	for _, at := range []int64{0, 42, -3} {
		_, err := kafkaoffset.StartOffsets(t.Context(), nil, nil, "orders", "billing", at, sarama.DefaultVersion)
		if err == nil || !strings.Contains(err.Error(), "neither sarama.OffsetNewest nor sarama.OffsetOldest") {
			t.Errorf("StartOffsets at %d = %v, want it refused", at, err)
		}
	}
}
