//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
	"testing"
)

// Checks: a run's sample counts the garbage collection cycles that ended
// during it, not the one measure forces before it, and the page faults of
// memory it touched for the first time.
func TestMeasureCountsCollectionsAndFaults(t *testing.T) {
	const n, cycles = 100, 3
	recs := makeRecords(n)
	var ta tally
	handled := func(t *tally) {
		for i := range t.seen {
			t.seen[i]++
		}
	}
	idle, err := measure("hand", func(_ config, _ records, t *tally) error {
		handled(t)
		return nil
	}, config{N: n}, recs, &ta)
	if err != nil {
		t.Fatal(err)
	}
	if idle.GCs != 0 {
		t.Errorf("a run that allocates nothing: GCs = %v, want 0", idle.GCs)
	}
	const pages = 256
	busy, err := measure("hand", func(_ config, _ records, t *tally) error {
		for range cycles {
			runtime.GC()
		}
		// Memory the process never had, touched page by page: the kernel
		// maps each page on its first touch.
		mem, err := syscall.Mmap(-1, 0, pages*os.Getpagesize(), syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		if err != nil {
			return err
		}
		for i := 0; i < len(mem); i += os.Getpagesize() {
			mem[i] = 1
		}
		handled(t)
		return syscall.Munmap(mem)
	}, config{N: n}, recs, &ta)
	if err != nil {
		t.Fatal(err)
	}
	if busy.GCs < cycles {
		t.Errorf("a run that collects %d times: GCs = %v", cycles, busy.GCs)
	}
	if busy.Faults < pages {
		t.Errorf("Faults = %v after touching %d fresh pages", busy.Faults, pages)
	}
}
