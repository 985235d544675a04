package cutenative

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The module's header copy (include/cutenative.h, what cgo compiles against once the module is fetched on its
// own) must be byte-identical to the C ABI's header in the repository; the CMake configure step copies it.
func TestHeaderCopyMatchesCAPI(t *testing.T) {
	canonical := filepath.Join("..", "..", "capi", "include", "cutenative.h")
	want, err := os.ReadFile(canonical)
	if os.IsNotExist(err) {
		t.Skipf("%s not found: the module is not inside its repository", canonical)
	}
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join("include", "cutenative.h"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("go/cutenative/include/cutenative.h differs from capi/include/cutenative.h: re-run CMake's configure step " +
			"(it copies the header) or cp capi/include/cutenative.h go/cutenative/include/")
	}
}
