package benchsrc

import "time"

// Usage is what a process has used so far. Subtract two readings to get
// what a run used.
type Usage struct {
	// CPU is user and system time: unlike the wall time, it barely moves
	// when other processes share the machine.
	CPU time.Duration
	// Faults counts minor page faults: pages the kernel mapped on first
	// touch, for a heap that grew or took back memory the Go runtime had
	// returned to the system. Each costs the faulting thread kernel time
	// (about 12 µs on the virtual machine docs/performance.md measures
	// on), so a run that faults more is slower for reasons other than its
	// own code.
	Faults int64
}

// Sub returns u − v.
func (u Usage) Sub(v Usage) Usage {
	return Usage{CPU: u.CPU - v.CPU, Faults: u.Faults - v.Faults}
}

// CPU is the CPU time the process has used so far (ReadUsage().CPU).
func CPU() time.Duration { return ReadUsage().CPU }
