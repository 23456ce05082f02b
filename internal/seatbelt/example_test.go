package seatbelt_test

import (
	"fmt"

	"github.com/pilotworkers/pilot/internal/seatbelt"
)

func ExampleProfile() {
	fmt.Print(seatbelt.Profile(seatbelt.Policy{
		Guard:    []string{"/Users/u/.ssh", "/Users/u/.codex"},
		Allow:    []string{"/Users/u/.codex"},
		WriteAll: true,
	}))
	// Output:
	// (version 1)
	// (allow default)
	// (deny file-read* file-write*
	//   (subpath "/Users/u/.codex")
	//   (subpath "/Users/u/.ssh"))
	// (allow file-read* file-write*
	//   (subpath "/Users/u/.codex"))
	// (deny file-write-unlink
	//   (literal "/Users")
	//   (literal "/Users/u"))
}

func ExampleQuote() {
	fmt.Println(seatbelt.Quote(`/Users/u/a "b" \c`))
	// Output: "/Users/u/a \"b\" \\c"
}
