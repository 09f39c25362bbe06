package pulsar

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"testing"
)

// Guarantee: two processes on one host (replicas of a pipeline) name the
// consumers of their sources apart: the suffix of the consumer names of
// the first source of one process is not that of another's.
func TestConsumerNamesDifferFromProcessToProcess(t *testing.T) {
	if os.Getenv("BOULEVARD_PULSAR_NAME_SUFFIX_CHILD") != "" {
		fmt.Printf("suffix=%s\n", nameSuffix(1))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestConsumerNamesDifferFromProcessToProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "BOULEVARD_PULSAR_NAME_SUFFIX_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the second process: %v\n%s", err, out)
	}
	m := regexp.MustCompile(`suffix=([0-9a-f]{8})`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("the second process printed no suffix:\n%s", out)
	}
	if other, own := string(m[1]), nameSuffix(1); other == own {
		t.Errorf("both processes name their first source's consumers with the suffix %s", own)
	}
}
