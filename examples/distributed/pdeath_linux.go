//go:build linux

package main

import "syscall"

// childAttr is how the coordinator starts its processes on Linux: each
// gets SIGTERM from the kernel when the thread that started it ends (its
// parent-death signal), so that it drains and exits when the coordinator
// dies without stopping it (SIGKILL, a second Ctrl-C, a crash) instead of
// running on, orphaned. spawn keeps that thread for the process's
// lifetime, so that it ends only with the coordinator.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
