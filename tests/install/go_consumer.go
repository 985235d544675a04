// A program outside the repository's Go module, built against an installed prefix through the module fetched
// from a module proxy (tests/install/test_install.sh): prints the library's version and a model's kind.
package main

import (
	"fmt"
	"os"

	"github.com/cutenative/cutenative/go/cutenative"
)

func main() {
	fmt.Println("version:", cutenative.Version())
	m, err := cutenative.Open(os.Args[1], nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer m.Close()
	info, err := m.Info()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("kind: %s\n", info.Kind)
}
