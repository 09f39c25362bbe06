package kafkaoffset

// StartOldest is the start Lag is given for a claim that starts at the
// partition's oldest record before it knows that record's offset (as
// sarama.OffsetOldest): its lag counts the whole log until then.
const StartOldest = -2

// Lag returns a claimed partition's lag and fetch lag, as the Kafka source
// and the Kafka topology backend report them, from its high-water mark,
// the group's committed offset (-1: none), the offset the claim started at
// (-1: not known yet; StartOldest: the oldest record, its offset not known
// yet) and the offset of the next record to fetch (-1: not known yet):
//   - lag is highWater − committed, the records a restart would read again
//     or for the first time; while the group has no committed offset,
//     highWater − start, the records since the claim started (a group that
//     starts at the newest record on a quiet topic is not behind);
//   - fetchLag is highWater − next, the records not fetched yet.
//
// Each is 0 while an offset it needs is not known, a highWater of 0 (none
// fetched nor listed yet) included, and never negative.
func Lag(highWater, committed, start, next int64) (lag, fetchLag int64) {
	if highWater <= 0 {
		return 0, 0
	}
	from := committed
	if from < 0 {
		from = start
		if start == StartOldest {
			from = 0 // every record the log holds is still to be read
		}
	}
	if from >= 0 {
		lag = max(0, highWater-from)
	}
	if next >= 0 {
		fetchLag = max(0, highWater-next)
	}
	return lag, fetchLag
}
