//go:build unix

package benchsrc

import (
	"syscall"
	"time"
)

// CPU is the CPU time the process has used so far, user and system, every
// thread: unlike the wall time, it barely moves when other processes share
// the machine.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
