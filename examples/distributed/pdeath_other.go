//go:build !linux

package main

import "syscall"

// childAttr is how the coordinator starts its processes: elsewhere than on
// Linux there is no parent-death signal, and a process whose coordinator
// died without stopping it keeps running until it is stopped by hand.
func childAttr() *syscall.SysProcAttr { return nil }
