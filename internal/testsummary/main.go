// Command testsummary reads the output of `go test -json` on standard input,
// prints the tests' human-readable output as go test would, and ends with one
// line counting the tests:
//
//	tests: 212 passed, 0 failed, 1 skipped
//
// It exits with status 1 when a test or a package failed (including a
// package that did not build), so CI can pipe `go test -json` through it.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
)

// event is the part of a test2json event this command reads.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// counts is what summarize found.
type counts struct {
	passed, failed, skipped int
	failedPackages          int
}

func (c counts) String() string {
	return fmt.Sprintf("tests: %d passed, %d failed, %d skipped", c.passed, c.failed, c.skipped)
}

// summarize copies every output line of r to w and counts the test results.
// Lines that are not JSON (a build error printed by go itself) are copied as
// they are.
func summarize(r io.Reader, w io.Writer) (counts, error) {
	var c counts
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if len(line) == 0 || line[0] != '{' || json.Unmarshal(line, &e) != nil {
			fmt.Fprintf(w, "%s\n", line)
			continue
		}
		switch e.Action {
		case "output":
			io.WriteString(w, e.Output)
		case "pass":
			if e.Test != "" {
				c.passed++
			}
		case "fail":
			if e.Test != "" {
				c.failed++
			} else {
				c.failedPackages++
			}
		case "skip":
			if e.Test != "" {
				c.skipped++
			}
		}
	}
	return c, sc.Err()
}

func main() {
	c, err := summarize(os.Stdin, os.Stdout)
	fmt.Println(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		os.Exit(1)
	}
	if c.failed > 0 || c.failedPackages > 0 {
		os.Exit(1)
	}
}
