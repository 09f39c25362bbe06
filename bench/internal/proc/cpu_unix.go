//go:build unix

// Package proc reads what the benchmark process itself has used.
package proc

import (
	"syscall"
	"time"
)

// CPU is the process's user and system CPU time so far.
func CPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
