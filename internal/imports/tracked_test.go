package imports_test

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedSize is the largest file the repository may track: its
// largest source, doc or image is well under it, and a compiled example
// (tens of megabytes) is far over.
const maxTrackedSize = 1 << 20

// executableMagic are the first bytes of the compiled programs `go build`
// writes: ELF (Linux and the BSDs), Mach-O (macOS, both byte orders,
// 32 and 64 bits) and PE (Windows).
var executableMagic = [][]byte{
	[]byte("\x7fELF"),
	{0xfe, 0xed, 0xfa, 0xce}, {0xfe, 0xed, 0xfa, 0xcf},
	{0xce, 0xfa, 0xed, 0xfe}, {0xcf, 0xfa, 0xed, 0xfe},
	[]byte("MZ"),
}

// TestNoBuildOutputIsTracked keeps compiled programs out of the
// repository: `go build ./examples/distributed` at the root writes
// ./distributed, and a commit that picks it up makes every clone tens of
// megabytes larger for good. No tracked file may be a compiled program or
// larger than maxTrackedSize.
func TestNoBuildOutputIsTracked(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skipf("%s is not a git checkout", root)
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	files := strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00")
	if len(files) < 100 {
		t.Fatalf("git ls-files listed %d files; the repository has hundreds", len(files))
	}
	for _, name := range files {
		path := filepath.Join(root, name)
		fi, err := os.Lstat(path)
		if err != nil {
			if os.IsNotExist(err) {
				continue // deleted in the work tree, not yet committed
			}
			t.Fatal(err)
		}
		if !fi.Mode().IsRegular() {
			continue
		}
		if fi.Size() > maxTrackedSize {
			t.Errorf("%s is tracked and has %d bytes, over %d: build output or data does not belong in the repository", name, fi.Size(), maxTrackedSize)
		}
		if magic := fileHead(t, path); isExecutable(magic) {
			t.Errorf("%s is tracked and is a compiled program (starts % x): remove it with git rm --cached and ignore it", name, magic)
		}
	}
}

// fileHead returns the first four bytes of the file at path, or fewer
// when it is shorter.
func fileHead(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 4)
	n, err := io.ReadFull(f, head)
	if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
		t.Fatal(err)
	}
	return head[:n]
}

func isExecutable(head []byte) bool {
	for _, m := range executableMagic {
		if bytes.HasPrefix(head, m) {
			return true
		}
	}
	return false
}
