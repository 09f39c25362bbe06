//go:build unix

package benchsrc

import (
	"syscall"
	"time"
)

// ReadUsage returns what the process has used so far, every thread.
func ReadUsage() Usage {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Usage{}
	}
	return Usage{
		CPU:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		Faults: int64(ru.Minflt),
	}
}
